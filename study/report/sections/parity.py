"""Tuning and compute parity of the primary comparisons: was each setting tuned for each arm,
fixed for all, or left at its default, where the chosen values lie in what was searched, and
whether the two arms trained on the same optimizer steps and tokens. The threats they show
are listed by `threats`; these tables give every number."""

from __future__ import annotations

from study.report import tuning, validity
from study.report.section import Section, Tables
from study.report.text import frame_table
from study.tracking.reading import StudyRecord

TUNING, COMPUTE = "tuning_parity", "compute_parity"


def _tables(record: StudyRecord) -> Tables:
    tuned, compute = tuning.tuning_table(record), validity.compute_table(record)
    return {name: table for name, table in ((TUNING, tuned), (COMPUTE, compute)) if not table.empty}


def _markdown(record: StudyRecord, tables: Tables) -> str:
    out = []
    if TUNING in tables:
        out += [
            "### Tuning parity",
            "",
            "How each setting was set for each arm of a primary comparison: tuned for the "
            "arm by its explore samples, fixed for all arms, or left at the trial default; "
            "`edge`: the chosen value is the smallest or largest sampled, or in the outer "
            f"{tuning.EDGE_SHARE:.0%} of its range (log scale for a log range).",
            "",
            frame_table(tables[TUNING].fillna("")),
        ]
    if COMPUTE in tables:
        compute = tables[COMPUTE]
        recorded = compute[["steps_run_a", "steps_run_b"]].notna().all(axis=1).any()
        out += [
            "",
            "### Compute parity",
            "",
            "Mean optimizer steps (all stages) and training tokens of each arm's completed "
            "confirm trials; `gap` is how much more the larger ran, as a share of the "
            f"smaller; `unequal` above {validity.COMPUTE_TOLERANCE:.0%}. Per seed paired in "
            "both arms (its mean over data seeds when crossed): `steps_run_seeds` seeds, the "
            "median and largest gap in optimizer steps (`steps_run_seed_gap_median`, "
            "`steps_run_seed_gap_max`, at seed `steps_run_seed_gap_max_seed`), "
            f"`unequal_per_seed` when the median is above {validity.COMPUTE_TOLERANCE:.0%}.",
            "",
            frame_table(compute) if recorded else "Steps and tokens: not recorded.",
        ]
    return "\n".join(out).strip()


SECTION = Section(name="parity", slot="verdicts", order=20, tables=_tables, markdown=_markdown)
