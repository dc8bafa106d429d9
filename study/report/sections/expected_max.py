"""How good can a budget get: the expected best dev F1 of n runs (Dodge et al. 2019, "Show
your work"), with the unbiased estimator of Tang et al. 2020 (the mean over all n-subsets of
the observed runs of their maximum), against n and against trial-hours. Computed only where
the draws are i.i.d.: an arm's confirm seeds, one configuration on different seeds."""

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

from study.report.plots import arm_colors, arm_legend, arm_markers, save_figure, subplots  # noqa: E402
from study.report.section import Section, Tables  # noqa: E402
from study.report.text import frame_table  # noqa: E402
from study.tracking.reading import StudyRecord  # noqa: E402

NAME = "expected_max"
COLUMNS = ["arm", "n_trials", "trial_hours", "expected_best_dev_f1"]


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
    """arm, n_trials, trial_hours, expected_best_dev_f1 over each arm's completed confirm
    trials (i.i.d. seeds of one configuration)."""
    rows = []
    done = record.confirm_completed()
    for arm, part in done.groupby("arm", sort=False):
        scores = part["dev_f1"].dropna() if "dev_f1" in part else pd.Series(dtype=float)
        if scores.empty:
            continue
        hours = _mean_hours(part)
        for n, best in enumerate(expected_max(scores.to_numpy()), start=1):
            rows.append((arm, n, n * hours, best))
    return pd.DataFrame(rows, columns=COLUMNS)


def _mean_hours(part: pd.DataFrame) -> float:
    if "duration_s" not in part or part["duration_s"].isna().all():
        return math.nan
    return float(part["duration_s"].mean()) / 3600


def plot_expected_max(table: pd.DataFrame, path: Path) -> Path | None:
    """Two panels, one line per arm: against runs (whole numbers: an axis of run counts has
    no 1.5) and against trial-hours."""
    if table.empty:
        return None
    arms = list(dict.fromkeys(table.arm))
    fig, axes = subplots(1, 2, figsize=(10, 3.8), sharey=True)
    colors, markers = arm_colors(arms), arm_markers(arms)
    for arm, part in table.groupby("arm", sort=False):
        style = {"marker": markers[arm], "color": colors[arm], "label": arm}
        axes[0].plot(part.n_trials, part.expected_best_dev_f1, **style)
        if part.trial_hours.notna().all():
            axes[1].plot(part.trial_hours, part.expected_best_dev_f1, **style)
    axes[0].xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].set(xlabel="confirm runs (seeds)", ylabel="expected best dev F1")
    axes[1].set(xlabel="trial-hours")
    arm_legend([axes[0]])
    fig.suptitle("Expected best dev F1 for a budget (unbiased estimator)", fontsize=10)
    return save_figure(fig, path)


def _figures(tables: Tables, folder: Path) -> dict[str, Path]:
    path = plot_expected_max(tables[NAME], folder / f"{NAME}.png")
    return {NAME: path} if path else {}


def _markdown(record: StudyRecord, tables: Tables) -> str:
    if tables[NAME].empty:
        return ""
    largest = tables[NAME].groupby("arm", sort=False).last().reset_index()
    return (
        "Expected best dev F1 of n confirm runs of the arm's configuration (unbiased estimator "
        f"over the i.i.d. confirm seeds; `{NAME}.csv` has every n, `{NAME}.png` plots it "
        "against runs and trial-hours). Largest n:\n\n" + frame_table(largest)
    )


SECTION = Section(
    name=NAME,
    slot="followups",
    order=10,
    tables=lambda record: {NAME: expected_max_table(record)},
    markdown=_markdown,
    figures=_figures,
    captions={
        NAME: "Expected best dev F1 against the number of confirm runs and trial-hours, "
        "per arm (unbiased estimator over i.i.d. seeds)."
    },  # fmt: skip
)
