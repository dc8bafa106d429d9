"""How good can a budget get: the expected best value of the study's metric over n runs (Dodge
et al. 2019, "Show your work"), with the unbiased estimator of Tang et al. 2020 (the mean over
all n-subsets of the observed runs of their best), against n and against trial-hours. Best is
the study's direction: the highest dev F1, the lowest dev loss. Computed only where the draws
are i.i.d.: an arm's confirm seeds, one configuration on different seeds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from scipy.special import gammaln  # noqa: E402

from study.report.arm_styles import arm_styles  # noqa: E402
from study.report.panels import legend_room, panel_figure, panel_legend  # noqa: E402
from study.report.plots import metric_label, save_figure  # noqa: E402
from study.report.section import Section, Tables  # noqa: E402
from study.report.text import frame_table  # noqa: E402
from study.tracking.reading import StudyRecord  # noqa: E402

NAME = "expected_max"


def best_column(metric: str) -> str:
    """The table's column of expected best values (`expected_best_dev_f1`)."""
    return f"expected_best_{metric}"


def expected_max(values: Sequence[float]) -> np.ndarray:
    """E[max of n draws without replacement] for n = 1..N, unbiased: with v sorted ascending,
    sum over i >= n of v_(i) C(i-1, n-1) / C(N, n) (log-gamma for large N)."""
    v = np.sort(np.asarray(values, float))
    big_n = len(v)
    out = np.empty(big_n)
    i = np.arange(1, big_n + 1)
    for n in range(1, big_n + 1):
        use = i >= n
        log_w = _log_comb(i[use] - 1, n - 1) - _log_comb(big_n, n)
        out[n - 1] = float(np.sum(v[use] * np.exp(log_w)))
    return out


def _log_comb(n, k) -> np.ndarray:
    n, k = np.asarray(n, float), np.asarray(k, float)
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def expected_max_table(record: StudyRecord) -> pd.DataFrame:
    """arm, n_trials, trial_hours and the expected best of the study's metric (`best_column`)
    over each arm's completed confirm trials (i.i.d. seeds of one configuration); for a metric
    to minimise, the expected lowest."""
    metric, mode = record.study_metric
    sign = -1.0 if mode == "min" else 1.0
    rows = []
    done = record.confirm_completed()
    for arm, part in done.groupby("arm", sort=False):
        scores = part[metric].dropna() if metric in part else pd.Series(dtype=float)
        if scores.empty:
            continue
        hours = _mean_hours(part)
        for n, best in enumerate(expected_max(sign * scores.to_numpy()), start=1):
            rows.append((arm, n, n * hours, sign * best))
    return pd.DataFrame(rows, columns=["arm", "n_trials", "trial_hours", best_column(metric)])


def _mean_hours(part: pd.DataFrame) -> float:
    if "duration_s" not in part or part["duration_s"].isna().all():
        return math.nan
    return float(part["duration_s"].mean()) / 3600


def plot_expected_max(record: StudyRecord, table: pd.DataFrame, path: Path) -> Path | None:
    """Two panels, one line per arm: against runs (whole numbers: an axis of run counts has
    no 1.5) and against trial-hours; many arms: a row of the two per group of arms."""
    metric, mode = record.study_metric
    column = best_column(metric)
    if table.empty or column not in table:
        return None
    styles = arm_styles(record)
    panels = styles.panels_of(table.arm)
    tall = 3.4 if len(panels) == 1 else 2.8
    fig, axes = panel_figure(len(panels), per=2, size=(4.0, tall), legend=legend_room(styles),
                             sharey=True, sharex="col")  # fmt: skip
    for (runs, hours), panel in zip(axes, panels, strict=True):
        for arm in panel.arms:
            part, look = table[table.arm == arm], styles[arm]
            style = {"marker": look.marker, "color": look.colour, "label": styles.name(arm),
                     "gid": arm, "zorder": 2 if look.shown else 1,
                     "lw": 1.5 if look.shown else 0.8}  # fmt: skip
            runs.plot(part.n_trials, part[column], **style)
            if part.trial_hours.notna().all():
                hours.plot(part.trial_hours, part[column], **style)
        runs.xaxis.set_major_locator(MaxNLocator(integer=True))
        runs.set_ylabel(f"expected best {metric_label(metric, mode)}", fontsize=8)
        for ax in (runs, hours):
            ax.set_title(panel.title, fontsize=8)
            ax.grid(alpha=0.3)
        panel_legend(hours, styles)
    axes[-1][0].set_xlabel("confirm runs (seeds)")
    axes[-1][1].set_xlabel("trial-hours")
    best = "lowest" if mode == "min" else "highest"
    fig.suptitle(f"{record.name}, confirm: expected best {metric} ({best}) for a budget "
                 "(unbiased estimator)", fontsize=10)  # fmt: skip
    return save_figure(fig, path)


def _figures(record: StudyRecord, tables: Tables, folder: Path) -> dict[str, Path]:
    path = plot_expected_max(record, tables[NAME], folder / f"{NAME}.png")
    return {NAME: path} if path else {}


def _markdown(record: StudyRecord, tables: Tables) -> str:
    if tables[NAME].empty:
        return ""
    metric, mode = record.study_metric
    largest = tables[NAME].groupby("arm", sort=False).last().reset_index()
    best = "lowest" if mode == "min" else "highest"
    return (
        f"Expected best {metric} ({best}, the study's metric) of n confirm runs of the arm's "
        "configuration (unbiased estimator over the i.i.d. confirm seeds; "
        f"`{NAME}.csv` has every n, `{NAME}.png` plots it against runs and trial-hours). "
        "Largest n:\n\n" + frame_table(largest)
    )


SECTION = Section(
    name=NAME,
    slot="followups",
    order=10,
    tables=lambda record: {NAME: expected_max_table(record)},
    markdown=_markdown,
    figures=_figures,
    captions={
        NAME: "Expected best {metric} against the number of confirm runs and trial-hours, "
        "per arm (unbiased estimator over i.i.d. seeds)."
    },  # fmt: skip
)
