"""Provenance a reviewer can check: when the analysis was declared, under which design, and
whether the confirm seeds were fresh in this tracking store.

The analysis counts as declared at the first trial of the first study run of the experiment
that ran confirm trials on any of this run's confirm seeds, under that run's design: its
`study_hash`, the sha256 of its `study.yaml` (study/tracking/seed_history.py). The confirm
seeds are *fresh* when no earlier study run used any of them, else *reused*; earlier runs
that used them under another design are a threat (the threats section's `confirm seeds`
check): this design may have been settled after their confirm results were seen. Every such
run is in `seed_history.csv`. A record built by hand, not read from a store, has none.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd

from study.names import RUN_KIND, STUDY_KIND
from study.report.section import Section, Tables
from study.tracking.reading import StudyRecord
from study.tracking.seed_history import FROM_TAG, SeedUse, confirm_seed_uses

NAME = "seed_history"
LISTED = 5  # earlier runs named in the text; the CSV has every one
SHORT = 12  # hex digits of a study hash shown in the text
COLUMNS = ["run_id", "this_run", "started", "first_trial", "study_hash", "hash_from",
           "same_design", "seeds"]  # fmt: skip


def seed_uses(record: StudyRecord) -> list[SeedUse] | None:
    """The study runs that used this run's confirm seeds, oldest first, this one included;
    None for a record that is no study run read from a tracking store."""
    if record.tags.get(RUN_KIND) != STUDY_KIND:
        return None
    return confirm_seed_uses(record.tracking_uri, record.run_id)


def _split(record: StudyRecord, uses: list[SeedUse]) -> tuple[SeedUse | None, list[SeedUse]]:
    """This run's use and the earlier runs' (those that started before it)."""
    index = next((i for i, u in enumerate(uses) if u.run_id == record.run_id), None)
    return (None, []) if index is None else (uses[index], uses[:index])


def _same(use: SeedUse, this: SeedUse) -> bool:
    """Whether `use` ran this run's design: a hash not recorded matches none but its own."""
    return use is this or (bool(use.study_hash) and use.study_hash == this.study_hash)


def history_table(record: StudyRecord) -> pd.DataFrame:
    """One row per study run that used this run's confirm seeds up to this one, oldest first:
    its start and its first trial's (UTC), its design hash and where it came from, whether
    that is this run's design, and which of the seeds it ran."""
    this, earlier = _split(record, seed_uses(record) or [])
    rows = [
        {"run_id": u.run_id, "this_run": u is this, "started": _when(u.started_ms),
         "first_trial": _when(u.first_trial_ms), "study_hash": u.study_hash,
         "hash_from": u.hash_from, "same_design": _same(u, this), "seeds": _seeds(u.seeds)}
        for u in ([*earlier, this] if this else [])
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


def reuse_threats(record: StudyRecord) -> list[str]:
    """Earlier study runs of this store that ran confirm trials on any of this run's confirm
    seeds under another design (or one not recorded), at most `LISTED` named, with a count."""
    rows = list(history_table(record).itertuples())
    other = [row for row in rows[:-1] if not row.same_design]
    if not other:
        return []
    return [
        f"This run's confirm seeds were used before under another design, by "
        f"{_count(len(other))} in this tracking store: {_listed(other, with_design=True)}. "
        f"This run's design (study hash `{_short(rows[-1].study_hash)}`) may have been settled "
        "after their confirm results were seen, so its verdicts are no held-out test of a "
        "design declared before those seeds; fresh confirm seeds (a `seeds` or "
        "`phases.confirm.seeds` list of seeds no earlier run used) would make them one."
    ]


def provenance_text(record: StudyRecord, table: pd.DataFrame) -> str:
    """The report's provenance paragraph from `history_table`; '' for a record that is no
    study run of a store."""
    if record.tags.get(RUN_KIND) != STUDY_KIND:
        return ""
    out = ["## Provenance", ""]
    if table.empty:
        out.append("No confirm trial is recorded for this study run, so there are no confirm "
                   "seeds to trace to a declared design.")  # fmt: skip
        return "\n".join(out)
    rows = list(table.itertuples())
    this, earlier = rows[-1], rows[:-1]
    if not earlier:
        out.append(
            f"The analysis was declared at {this.first_trial}, when the first trial of this "
            f"study run started, with study hash `{_short(this.study_hash)}` "
            f"({_hash_source(this)}). Its confirm seeds {this.seeds} are **fresh** in this "
            f"tracking store: no earlier study run of experiment `{record.name}` ran a confirm "
            "trial on any of them."
        )
        return "\n".join(out)
    first = earlier[0]
    design = (
        "the same design as this run's"
        if first.same_design
        else f"another design: this run's, study hash `{_short(this.study_hash)}`, was "
        f"declared at {this.first_trial}, when its first trial started"
    )
    out.append(
        f"The analysis was declared at {first.first_trial}, when the first trial of study run "
        f"`{first.run_id}` started, the first in this tracking store to run confirm trials on "
        f"these seeds, with study hash `{_short(first.study_hash)}` ({design}). Its confirm "
        f"seeds {this.seeds} are **reused**: {_count(len(earlier))} of experiment "
        f"`{record.name}` ran confirm trials on some of them before this one: "
        f"{_listed(earlier, with_design=False)}."
        + (
            " Those under another design are a threat (below)."
            if not all(row.same_design for row in earlier)
            else ""
        )  # fmt: skip
    )
    return "\n".join(out)


def _listed(rows: list, with_design: bool) -> str:
    """Rows of `history_table`, at most `LISTED`; each with its hash unless it is this run's
    design and `with_design` is false."""

    def one(row) -> str:
        same = row.same_design and not with_design
        design = "same design" if same else f"study hash `{_short(row.study_hash)}`"
        return f"`{row.run_id}` (started {row.started}, {design}, seeds {row.seeds})"

    shown = "; ".join(one(row) for row in rows[:LISTED])
    more = len(rows) - LISTED
    return shown + (f"; and {more} more (`{NAME}.csv` lists every one)" if more > 0 else "")


def _count(n: int) -> str:
    return f"{n} earlier study run" + ("" if n == 1 else "s")


def _short(digest: str) -> str:
    return digest[:SHORT] if digest else "not recorded"


def _hash_source(row) -> str:
    if not row.study_hash:
        return "not recorded: neither the tag nor the `study.yaml` artifact is there"
    where = "its `study_hash` tag" if row.hash_from == FROM_TAG else "hashed from the artifact"
    return f"sha256 of the study run's `study.yaml`, {where}"


def _when(ms: int | None) -> str:
    if ms is None:
        return "no trial"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _seeds(seeds) -> str:
    """Seeds as ranges: [200, 201, 202, 205] -> '200-202, 205'."""
    seeds, parts, start = sorted(seeds), [], None
    for i, seed in enumerate(seeds):
        start = seed if start is None else start
        if i + 1 == len(seeds) or seeds[i + 1] != seed + 1:
            parts.append(str(seed) if start == seed else f"{start}-{seed}")
            start = None
    return ", ".join(parts) or "none"


def _markdown(record: StudyRecord, tables: Tables) -> str:
    return provenance_text(record, tables[NAME])


SECTION = Section(
    name="provenance",
    slot="verdicts",
    order=5,
    tables=lambda record: {NAME: history_table(record)},
    markdown=_markdown,
)
