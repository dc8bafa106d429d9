"""The study report, made from MLflow alone: `python -m study.report NAME` (see `__main__`).

`data` reads a study back from MLflow into pandas, `build` computes and writes the report and
logs it to MLflow, `markdown` writes its page, `plots` its figures, `followups` the sections a
reader asks for after the verdicts, `heads` the single-head tables, `variance` the split of
seed variance into initialisation and data order. Imports neither Ray nor torch.
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

__all__ = [
    "Report", "arm_metrics", "arm_summary", "build_report", "comparison_label", "log_to_runs",
    "metric_key", "report_folder", "write_report",
]  # fmt: skip
