"""Had each arm finished learning: per arm, how many completed confirm trials had stopped
improving by the end (their smoothed curve, the least-squares line through their last third of
evaluations, rose by less than the declared plateau over that third, whatever stopped them),
and the largest such gain. A verdict between arms that had not is qualified as
budget-sensitive where it is printed."""

from __future__ import annotations

from study.report import validity
from study.report.section import Section, Tables
from study.report.text import markdown_table, num
from study.tracking.reading import StudyRecord

NAME = "convergence"


def _markdown(record: StudyRecord, tables: Tables) -> str:
    table = tables[NAME]
    if table.empty:
        return ""
    metric = (record.plan.get("metric") or {}).get("name", "dev_f1")
    rows = [
        [f"`{r['arm']}`", validity.converged_text(r), num(r["final_gain_max"], 3)]
        for r in table.to_dict("records")
    ]
    return (
        f"Convergence (confirm phase): a trial converged when its smoothed `{metric}` curve, "
        "the least-squares line through its last third of evaluations (at least 2), rose by "
        f"less than the declared plateau {record.analysis.plateau:g} over that third "
        "(`final_gain`, in the metric's better direction), whatever stopped it: a stop by "
        "`until_plateau`'s patience is not taken as convergence."
        + _recomputed(table)
        + "\n\n"
        + markdown_table(["arm", "confirm seeds converged", "largest final_gain"], rows)
    )


def _recomputed(table) -> str:
    """A sentence when some trials' final_gain was computed again from their curve."""
    n = int(table.recomputed.sum()) if "recomputed" in table else 0
    if not n:
        return ""
    return (
        f" {n} confirm trial{'s' if n > 1 else ''} reported `final_gain` under the earlier "
        "rule (the best of the last third against the best before it): computed again here "
        "from the curve MLflow holds (where a kept checkpoint's re-score was logged over the "
        "last evaluation, that evaluation's value is worked out from `curve_area`, or left "
        "out)."
    )


SECTION = Section(
    name=NAME,
    slot="results",
    order=5,
    tables=lambda record: {NAME: validity.convergence_table(record)},
    markdown=_markdown,
)
