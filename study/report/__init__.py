"""The study report, made from MLflow alone: `python -m study.report NAME` (see `__main__`).

The study is read back from MLflow by `study.tracking.reading` and, each evaluation's
metrics, `study.tracking.curves` (beside their writer); `build`
computes and writes the report (it writes nothing to MLflow: the driver logs the report and
its `run_metrics` onto the study's runs through `study.tracking.store`), `markdown`
writes its page (with `text`, the number and table formats), `plots` its core figures.
Everything beyond the core (expected best score for a budget, degenerate runs, the variance
split, the single-head tables, reproducibility) is a section: one module each in
`sections/`, found by `section.all_sections`. Imports neither Ray nor torch.
"""

from __future__ import annotations

import importlib
from typing import Any

# the public name -> its module, imported on first use (PEP 562): `python -m study.report
# --help` and `from study.report import plots` load no more than they need
_HOMES = {
    "Report": "study.report.build",
    "arm_metrics": "study.report.build",
    "arm_summary": "study.report.build",
    "build_report": "study.report.build",
    "comparison_label": "study.report.build",
    "metric_key": "study.report.build",
    "report_folder": "study.report.build",
    "run_metrics": "study.report.build",
    "write_report": "study.report.build",
    "Section": "study.report.section",
    "all_sections": "study.report.section",
}

__all__ = [
    "Report", "Section", "all_sections", "arm_metrics", "arm_summary", "build_report",
    "comparison_label", "metric_key", "report_folder", "run_metrics", "write_report",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'study.report' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
