"""The study report, made from MLflow alone: `python -m study.report NAME` (see `__main__`).

The study is read back from MLflow by `study.tracking.reading` (beside its writer); `build`
computes and writes the report and logs it back through `study.tracking.store`, `markdown`
writes its page (with `text`, the number and table formats), `plots` its core figures.
Everything beyond the core (expected best score for a budget, degenerate runs, the variance
split, the single-head tables, reproducibility) is a section: one module each in
`sections/`, found by `section.all_sections`. Imports neither Ray nor torch.
"""

from __future__ import annotations

from study.report.build import (
    Report,
    arm_metrics,
    arm_summary,
    build_report,
    comparison_label,
    log_to_runs,
    metric_key,
    report_folder,
    write_report,
)
from study.report.section import Section, all_sections

__all__ = [
    "Report", "Section", "all_sections", "arm_metrics", "arm_summary", "build_report",
    "comparison_label", "log_to_runs", "metric_key", "report_folder", "write_report",
]  # fmt: skip
