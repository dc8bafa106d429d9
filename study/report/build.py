"""Build a study's report from MLflow: the tables, the figures and the page, written into a
folder all at once (a half-written report never replaces a good one). The report reads and
never writes to MLflow: the driver that owns the study's runs logs the folder as the study
run's artifacts, and `run_metrics` (the per-arm summaries and comparison figures, the
verdicts' counts) as metrics of the arm runs and the study run, so sorting runs in the MLflow
UI shows the results."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from study import stats
from study.folder_names import MARKER, MARKER_TEXT, check_replaceable, report_folder
from study.names import CONFIRM, factor_value
from study.outputs import DEFAULT_REPORTS
from study.report import plots
from study.report.html import render_html
from study.report.layer_pairs import require_fingerprints
from study.report.markdown import is_synthetic, render_markdown, report_title
from study.report.section import Section, all_sections
from study.tracking.curves import layer_dynamics, learning_curves
from study.tracking.reading import StudyRecord, load_study_record
from trainables.errors import UserInputError

log = logging.getLogger(__name__)
HTML_PAGE = "report.html"
SUMMARY_METRIC = "test_f1"  # f1_mean / f1_std on arm runs: held-out F1, not the tuned dev F1


@dataclass
class Report:
    record: StudyRecord
    arm_table: pd.DataFrame
    comparisons: list[stats.Comparison]
    figures: dict[str, Path]
    folder: Path
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # the sections' tables
    sections: list[Section] = field(default_factory=list)

    def summary_line(self) -> str:
        primary = [c for c in self.comparisons if c.primary]
        verdicts = ", ".join(f"{c.arm_a} vs {c.arm_b}: {c.outcome}" for c in primary)
        what = "synthetic report" if is_synthetic(self.record) else "report"
        return (f"{what}: {self.folder / 'README.md'} ({len(primary)} primary comparison(s) "
                f"on {self.record.analysis.primary}: {verdicts or 'none'})")  # fmt: skip


def arm_summary(record: StudyRecord) -> pd.DataFrame:
    """Per arm, over completed confirm seeds: n and mean/std of every compared metric, plus
    the confirm sample's searched factors."""
    done = record.confirm_completed()
    rows = []
    for arm in record.arms:
        part = done[done.arm == arm]
        row: dict[str, Any] = {"arm": arm, "n_seeds": len(part)}
        for name in record.searched:
            values = sorted({v for v in part.get(name, [])}, key=str)
            row[name] = ", ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in values)
        for metric in record.metrics:
            values = part[metric].dropna() if metric in part else pd.Series(dtype=float)
            row[f"{metric}_mean"] = values.mean() if len(values) else math.nan
            row[f"{metric}_std"] = values.std(ddof=1) if len(values) > 1 else math.nan
            row[f"{metric}_n"] = len(values)
        rows.append(row)
    return pd.DataFrame(rows)


def compare_record(record: StudyRecord, aso: dict | None = None) -> list[stats.Comparison]:
    """Every comparison of the study's arms under the analysis it declared, primary ones with
    their verdicts: what the report shows, and what `study.results.load_verdicts` returns."""
    baseline = (
        json.loads(record.tags["compare_baseline"]) if "compare_baseline" in record.tags else None
    )
    return stats.compare_arms(
        record.scores(),
        record.arms,
        record.grid,
        record.metrics,
        baseline,
        aso_kwargs=aso,
        analysis=record.analysis,
    )


def comparisons_table(comparisons: list[stats.Comparison]) -> pd.DataFrame:
    """One row per comparison, every figure and its verdict: `comparisons.csv`."""
    return pd.DataFrame([c.row() for c in comparisons])


def build_report(record: StudyRecord, folder: Path, aso: dict | None = None) -> Report:
    """Compute everything and draw the figures into `folder` (which must exist)."""
    comparisons = compare_record(record, aso)
    curves = learning_curves(record, CONFIRM)
    dynamics = layer_dynamics(record)
    drawn = {
        "lr_vs_f1": plots.lr_vs_f1(record, folder / "lr_vs_f1.png"),
        "learning_curves": plots.learning_curves(curves, record, folder / "learning_curves.png"),
        "seeds": plots.seed_distributions(record, folder / "seeds.png"),
        "heatmap": plots.factor_heatmap(record, SUMMARY_METRIC, folder / "heatmap.png"),
        "dynamics": plots.dynamics_heatmaps(dynamics, record, folder / "dynamics.png"),
    }
    sections = all_sections()
    tables: dict[str, pd.DataFrame] = {}
    for section in sections:
        own = section.tables(record)
        tables.update(own)
        drawn.update(section.figures(record, own, folder))
    figures = {k: v for k, v in drawn.items() if v is not None}
    report = Report(record, arm_summary(record), comparisons, figures, folder, tables, sections)
    _write_tables(report, curves, dynamics)
    page = render_markdown(report)
    (folder / "README.md").write_text(page)
    # the same page for the MLflow UI's artifact view, which renders HTML but not Markdown
    title = f"{report_title(record)}: {record.name}"
    (folder / HTML_PAGE).write_text(render_html(page, folder, title))
    return report


def _write_tables(report: Report, curves: pd.DataFrame, dynamics: pd.DataFrame) -> None:
    keep = [c for c in report.record.trials.columns if c != "data"]
    report.record.trials[keep].to_csv(report.folder / "trials.csv", index=False)
    report.arm_table.to_csv(report.folder / "arms.csv", index=False)
    comparisons_table(report.comparisons).to_csv(report.folder / "comparisons.csv", index=False)
    curves.to_csv(report.folder / "learning_curves.csv", index=False)
    if not dynamics.empty:
        dynamics.to_csv(report.folder / "dynamics.csv", index=False)
    for name, table in report.tables.items():
        table.to_csv(report.folder / f"{name}.csv", index=False)


def write_report(
    tracking_uri: str,
    study: str,
    out: Path | str | None = None,
    run_id: str | None = None,
    reports_root: Path | str = DEFAULT_REPORTS,
    aso: dict | None = None,
    require_layers: bool = False,
) -> Report:
    """Build the report in a temporary folder beside its destination and move it into place
    only when complete. `require_layers`: refuse, before anything is written, a study whose
    trials kept no layer fingerprints to compare."""
    record = load_study_record(tracking_uri, study, run_id)
    if require_layers:
        require_fingerprints(record)
    folder = Path(out) if out else report_folder(reports_root, study, record.tags.get("profile"))
    check_replaceable(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    if not os.access(folder.parent, os.W_OK):
        raise UserInputError(f"cannot write the report: {folder.parent} is not writable")
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        report = build_report(record, staging, aso)
        (staging / MARKER).write_text(MARKER_TEXT)
        _replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    report.folder = folder
    report.figures = {k: folder / p.name for k, p in report.figures.items()}
    return report


def _replace(staging: Path, folder: Path) -> None:
    check_replaceable(folder)
    old = folder.with_name(f".{folder.name}-old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    staging.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


def metric_key(*parts: str) -> str:
    """MLflow metric names allow letters, digits and _ - . / space only."""
    return "/".join(re.sub(r"[^A-Za-z0-9_\-. ]", "_", p) for p in parts)


def comparison_label(c: stats.Comparison, arms: dict[str, dict[str, Any]]) -> str:
    """`depth_5_vs_6`: the differing factor and its two values; the other factors are fixed
    by the arm run the metric is logged on."""
    if c.factor and c.factor in arms[c.arm_a] and c.factor in arms[c.arm_b]:
        a, b = (factor_value(c.factor, arms[arm][c.factor]) for arm in (c.arm_a, c.arm_b))
        return f"{c.factor}_{a}_vs_{b}"
    return f"vs_{c.arm_b}"


def arm_metrics(report: Report) -> dict[str, dict[str, float]]:
    """Per arm run: f1_mean / f1_std / n_seeds (test F1), each metric's mean and std, and for
    each comparison in which the arm is A: difference, CI, Holm p and eps_min."""
    out: dict[str, dict[str, float]] = {}
    for row in report.arm_table.to_dict("records"):
        values = {
            "f1_mean": row[f"{SUMMARY_METRIC}_mean"],
            "f1_std": row[f"{SUMMARY_METRIC}_std"],
            "n_seeds": float(row["n_seeds"]),
        }
        for metric in report.record.metrics:
            values[f"{metric}_mean"] = row[f"{metric}_mean"]
            values[f"{metric}_std"] = row[f"{metric}_std"]
        out[row["arm"]] = values
    for c in report.comparisons:
        label = comparison_label(c, report.record.arms)
        figures = {"diff": c.diff, "ci_low": c.ci_low, "ci_high": c.ci_high,
                   "p_holm": c.p_holm, "p_equivalence": c.p_equivalence_holm,
                   "eps_min": c.eps_winner}  # fmt: skip
        for name, value in figures.items():
            out.setdefault(c.arm_a, {})[metric_key("cmp", label, c.metric, name)] = value
    return out


def run_metrics(report: Report) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """The report's summary as metrics of its runs, for the driver to log: each arm's on its
    arm run (by run id), and the comparisons' and primary verdicts' counts on the study run."""
    arm_runs = report.record.arm_runs
    per_run = {arm_runs[arm]: values for arm, values in arm_metrics(report).items()
               if arm in arm_runs}  # fmt: skip
    primary = [c for c in report.comparisons if c.primary]
    counts = {"comparisons": len(report.comparisons), "primary_comparisons": len(primary)}
    for outcome in ("A better", "B better", "equivalent", "A non-inferior", "B non-inferior",
                    "inconclusive"):  # fmt: skip
        counts[f"verdicts_{outcome.replace(' ', '_').replace('-', '_')}"] = sum(
            c.outcome == outcome for c in primary
        )
    return per_run, counts
