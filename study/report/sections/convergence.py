"""Had each arm finished learning: per arm, how many completed confirm trials had stopped
improving by the end (`until_plateau` stopped them, or the best of their last third of
evaluations beat the best before by less than the declared plateau), and the largest such
gain. A verdict between arms that had not is
qualified as budget-sensitive where it is printed."""

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
        f"Convergence (confirm phase): a trial converged when `until_plateau` stopped it, or "
        f"when the best `{metric}` of its last third of evaluations beat the best before by "
        f"less than the declared plateau {record.analysis.plateau:g} (`final_gain`, in the "
        "metric's better direction).\n\n"
        + markdown_table(["arm", "confirm seeds converged", "largest final_gain"], rows)
    )


SECTION = Section(
    name=NAME,
    slot="results",
    order=5,
    tables=lambda record: {NAME: validity.convergence_table(record)},
    markdown=_markdown,
)
