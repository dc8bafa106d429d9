"""Threats to validity, generated from what the study recorded: every report has this
section, listing each threat its checks found with the numbers behind it, or, when none was
found, which checks ran. The checks live in `study/report/validity.py` and, for tuning parity,
`study/report/tuning.py`."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from study.report import provenance, tuning, validity
from study.report.section import Section, Tables
from study.report.sections import declaration
from study.spec.phases import MIN_ASHA_SAMPLES
from study.tracking.reading import StudyRecord

NAME = "threats"
# Each check: what it looks for, and its threats (None: its inputs were not recorded).
CHECKS: dict[str, tuple[str, Callable[[StudyRecord], list[str] | None]]] = {
    "convergence": (
        "every confirm trial of a primary comparison had stopped improving",
        validity.convergence_threats,
    ),
    "edges": (
        "no chosen value at the edge of its search",
        lambda r: tuning.edge_threats(tuning.tuning_table(r)),
    ),
    "tuning": (
        "both arms of each primary comparison tuned alike",
        lambda r: tuning.parity_threats(r, tuning.tuning_table(r)),
    ),
    "compute": (
        "both arms of each primary comparison trained on the same steps and tokens "
        f"(within {validity.COMPUTE_TOLERANCE:.0%} in mean, and in steps for the median seed)",
        lambda r: validity.compute_threats(validity.compute_table(r)),
    ),
    "stopping point": (
        "the primary metric's paired differences do not track the per-seed gaps in steps "
        f"(Pearson r over at least {validity.STOPPING_MIN_SEEDS} seeds; flagged when "
        f"p < {validity.STOPPING_P:g} or |r| ≥ {validity.STOPPING_R:g})",
        validity.stopping_threats,
    ),
    "rank test": (
        "enough seeds for an exact signed-rank test to reach α",
        validity.rank_test_threats,
    ),
    "dev reuse": (
        "no compared metric measured on the dev set the selection used",
        validity.dev_reuse_threats,
    ),
    "pruning": (
        f"explore pruned, if at all, with at least {MIN_ASHA_SAMPLES} samples per arm",
        validity.pruning_threats,
    ),
    "fixed values": ("no fixed value chosen on another study's seeds", validity.fixed_from_threats),
    "code": ("every driver of the study ran the same code", provenance.code_threats),
    "confirm seeds": (
        "no earlier study run in this tracking store ran these confirm seeds under another design",
        declaration.reuse_threats,
    ),
}


def threats_table(record: StudyRecord) -> pd.DataFrame:
    """One row per threat found (check, threat), and one per check that could not run
    (threat empty, `recorded` false)."""
    rows = []
    for check, (_, run) in CHECKS.items():
        found = run(record)
        if found is None:
            rows.append({"check": check, "recorded": False, "threat": ""})
        rows += [{"check": check, "recorded": True, "threat": text} for text in found or []]
    return pd.DataFrame(rows, columns=["check", "recorded", "threat"])


def _markdown(record: StudyRecord, tables: Tables) -> str:
    table = tables[NAME]
    found = table[table.threat != ""]
    missing = table.check[~table.recorded.astype(bool)].tolist()
    ran = [c for c in CHECKS if c not in missing]
    out = ["## Threats to validity", ""]
    if len(found):
        out += ["Generated from the study's records; each verdict above stands, read with:", ""]
        out += [f"- **{row.check}**: {row.threat}" for row in found.itertuples()]
    else:
        out.append(
            "No threat found. Checks that ran: "
            + "; ".join(f"{c} ({CHECKS[c][0]})" for c in ran)
            + "."
        )
    if missing:
        out += [
            "",
            f"Not recorded, so not checked: {', '.join(missing)} (the trials of this "
            "study run did not report their convergence or their steps and tokens).",
        ]
    return "\n".join(out)


SECTION = Section(
    name=NAME,
    slot="verdicts",
    order=10,
    tables=lambda record: {NAME: threats_table(record)},
    markdown=_markdown,
)
