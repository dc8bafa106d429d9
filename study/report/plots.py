"""The report's figures, drawn from the tables of `study.tracking.reading` with matplotlib.

Each function writes one PNG and returns its path, or None when the study has nothing to
show for it (no searched lr, fewer than two grid factors, ...). Figures are meant to be read
at a glance in a paper appendix: every one has a title, labelled axes with units and a legend.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from study.names import EXPLORE  # noqa: E402
from study.report.text import factor_text  # noqa: E402
from study.tracking.reading import StudyRecord  # noqa: E402
from trainables.settings import INTERMEDIATE, stage_label  # noqa: E402

LABELS = {
    "dev_f1": "dev F1 (conlleval)",
    "test_f1": "test F1 (conlleval)",
    "curve_area": "learning-curve area (mean dev F1 over evaluations)",
    "steps_to_95": "steps to 95% of final dev F1 (lower = faster)",
}
SHORT = {"dev_f1": "dev F1", "test_f1": "test F1", "curve_area": "curve area",
         "steps_to_95": "steps to 95% F1 (lower = faster)"}  # fmt: skip
DPI = 110


def arm_labels(record: StudyRecord) -> dict[str, str]:
    """Arms named by the factors that vary between them (`depth=5`), not the full id."""
    varying = [k for k, v in record.grid.items() if len(v) > 1] or list(record.grid)
    return {
        arm: ", ".join(f"{k}={factor_text(k, factors.get(k))}" for k in varying) or arm
        for arm, factors in record.arms.items()
    }


def _colors(arms: list[str]) -> dict[str, tuple]:
    cmap = plt.get_cmap("tab10")
    return {arm: cmap(i % 10) for i, arm in enumerate(arms)}


def save_figure(fig: Figure, path: Path) -> Path:
    """Every figure of the report is laid out, written and closed alike (closed: a report
    draws dozens, and pyplot keeps each open figure's memory)."""
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def lr_vs_f1(record: StudyRecord, path: Path) -> Path | None:
    """Explore phase: final (or last, when pruned) dev F1 against the learning rate, one
    colour per arm, one point per seed, a line through each sample's seed mean."""
    t = record.trials
    explore = t[(t.phase == EXPLORE) & t.status.isin(["completed", "pruned"])]
    if explore.empty or "lr" not in record.searched or "dev_f1" not in explore:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    colors, labels = _colors(list(record.arms)), arm_labels(record)
    for arm, rows in explore.groupby("arm", sort=False):
        lr = rows.lr.astype(float)
        done = rows.status == "completed"
        ax.scatter(lr[done], rows.dev_f1[done], color=colors[arm], s=28, label=labels[arm])
        ax.scatter(lr[~done], rows.dev_f1[~done], facecolors="none", edgecolors=colors[arm], s=28)
        means = rows.assign(lr=lr).groupby("lr").dev_f1.agg(["mean", "min", "max"])
        ax.plot(means.index, means["mean"], color=colors[arm], alpha=0.6)
    ax.set_xscale("log")
    ax.set_xlabel("learning rate (log scale)")
    ax.set_ylabel(LABELS["dev_f1"])
    ax.set_title(
        f"{record.name}, explore: dev F1 vs learning rate per arm\n"
        "filled = completed seed, hollow = pruned by ASHA (value at its last evaluation)",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title="arm")
    return save_figure(fig, path)


def learning_curves(curves: pd.DataFrame, record: StudyRecord, path: Path) -> Path | None:
    """Confirm phase: dev F1 over optimizer steps per arm, mean over seeds with a min-max
    band; seeds are aligned by evaluation index."""
    if curves.empty:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    colors, labels, name = _colors(list(record.arms)), arm_labels(record), record.name
    for arm, rows in curves.groupby("arm", sort=False):
        by_eval = rows.groupby("evaluation").agg(
            step=("step", "mean"), mean=("dev_f1", "mean"), low=("dev_f1", "min"),
            high=("dev_f1", "max"), n=("seed", "nunique"),
        )  # fmt: skip
        n = int(by_eval.n.max())
        ax.plot(by_eval.step, by_eval["mean"], marker="o", ms=3, color=colors[arm],
                label=f"{labels[arm]} (n={n} seeds)")  # fmt: skip
        ax.fill_between(by_eval.step, by_eval.low, by_eval.high, color=colors[arm], alpha=0.15)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(LABELS["dev_f1"])
    ax.set_title(f"{name}, confirm: dev-F1 learning curves (mean over seeds, band = min-max)",
                 fontsize=10)  # fmt: skip
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def seed_distributions(record: StudyRecord, path: Path) -> Path | None:
    """Confirm phase: every seed's value per arm and metric as a box with the points over it;
    grey lines join one seed across arms, since the comparisons are paired by seed."""
    done = record.confirm_completed()
    metrics = [m for m in record.metrics if m in done and done[m].notna().any()]
    if done.empty or not metrics:
        return None
    arms = [a for a in record.arms if a in set(done.arm)]
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 4.2), squeeze=False)
    colors, labels = _colors(list(record.arms)), arm_labels(record)
    for ax, metric in zip(axes[0], metrics, strict=True):
        table = done.pivot_table(index="seed", columns="arm", values=metric).reindex(columns=arms)
        ax.boxplot([table[a].dropna() for a in arms], widths=0.5, showfliers=False)
        for _, values in table.iterrows():
            ax.plot(range(1, len(arms) + 1), values.to_numpy(), color="grey", alpha=0.4, lw=0.8)
        for i, arm in enumerate(arms, start=1):
            ax.scatter(np.full(len(table), i), table[arm], color=colors[arm], s=18, zorder=3)
        ax.set_xticks(range(1, len(arms) + 1), [_wrap(labels[a]) for a in arms], fontsize=7)
        ax.set_title(SHORT.get(metric, metric), fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(f"{record.name}, confirm: per-seed values by arm (lines join one seed)",
                 fontsize=10)  # fmt: skip
    return save_figure(fig, path)


def _annotate(ax, image, values: np.ndarray) -> None:
    """Cell values in black on light cells and white on dark ones."""
    for (i, j), value in np.ndenumerate(values):
        light = image.norm(value) > 0.6 if np.isfinite(value) else False
        ax.text(j, i, f"{value:.2g}", ha="center", va="center", fontsize=7,
                color="black" if light else "white")  # fmt: skip


def _wrap(arm: str) -> str:
    return arm.replace(", ", "\n")


def factor_heatmap(record: StudyRecord, metric: str, path: Path) -> Path | None:
    """Mean confirm metric over two grid factors (e.g. reinit k x data fraction), when the
    grid has two factors with several values each."""
    grid = {k: v for k, v in record.grid.items() if len(v) > 1}
    done = record.confirm_completed()
    if len(grid) != 2 or done.empty or metric not in done:
        return None
    rows, cols = list(grid)
    if INTERMEDIATE in grid:  # lists of stages, by their names (a list is no pivot key)
        grid[INTERMEDIATE] = [factor_text(INTERMEDIATE, v) for v in grid[INTERMEDIATE]]
        done = done.assign(**{INTERMEDIATE: done[INTERMEDIATE].map(stage_label)})
    table = done.pivot_table(index=rows, columns=cols, values=metric, aggfunc="mean")
    table = table.reindex(index=grid[rows], columns=grid[cols])
    counts = done.pivot_table(index=rows, columns=cols, values=metric, aggfunc="count")
    counts = counts.reindex(index=grid[rows], columns=grid[cols])
    fig, ax = plt.subplots(figsize=(1.6 * len(grid[cols]) + 3, 0.6 * len(grid[rows]) + 2.5))
    image = ax.imshow(table.to_numpy(float), cmap="viridis", aspect="auto")
    for (i, j), value in np.ndenumerate(table.to_numpy(float)):
        n = counts.to_numpy()[i, j]
        text = "n/a" if np.isnan(value) else f"{value:.3f}\n(n={int(n)})"
        ax.text(j, i, text, ha="center", va="center", color="white", fontsize=8)
    ax.set_xticks(range(len(grid[cols])), [str(v) for v in grid[cols]])
    ax.set_yticks(range(len(grid[rows])), [str(v) for v in grid[rows]])
    ax.set_xlabel(cols)
    ax.set_ylabel(rows)
    fig.colorbar(image, ax=ax, label=f"mean {LABELS.get(metric, metric)}")
    ax.set_title(f"{record.name}, confirm: mean {metric} over seeds", fontsize=10)
    return save_figure(fig, path)


DYNAMICS = {
    "l2_sum": "weight L2 distance from pretrained (sum of Q, K, V, out, FFN)",
    "attn_js": "attention JS divergence from pretrained (nats)",
    "cka": "linear CKA with pretrained hidden states (1 = same)",
    "svcca": "SVCCA distance from pretrained hidden states (0 = same)",
}


HIDDEN_STATE_MEASURES = ("cka", "svcca")  # rows are hidden states (0 = embeddings)
_WEIGHT_PART = re.compile(r"l2_(?!sum$)")  # the per-matrix distances: l2_sum stands for them
_AFTER_STAGE = re.compile(r"stage\d+_")  # measured after an intermediate stage: its section's


def dynamics_measures(measured: set[str]) -> list[str]:
    """The measures drawn: the known ones in their order, then any other the trainable reported
    (a new measure needs no edit here), leaving out the per-matrix weight distances and what
    was measured after an intermediate stage (study/report/sections/stages.py draws those)."""
    known = [m for m in DYNAMICS if m in measured]
    other = measured - set(DYNAMICS)
    return known + sorted(m for m in other if not (_WEIGHT_PART.match(m) or _AFTER_STAGE.match(m)))


def dynamics_heatmaps(table: pd.DataFrame, record: StudyRecord, path: Path) -> Path | None:
    """Layer x arm heatmaps of how far each layer moved, mean over seeds, one panel per
    measure. CKA/SVCCA rows are hidden states (0 = embeddings), the others blocks."""
    shown = dynamics_measures(set(table.metric)) if not table.empty else []
    if not shown:
        return None
    labels = arm_labels(record)
    arms = [a for a in record.arms if a in set(table.arm)]
    width = 0.9 * len(arms) + 1.8 if len(arms) <= 12 else 0.3 * len(arms) + 2.5
    fig, axes = plt.subplots(1, len(shown), figsize=(width * len(shown), 4.8), squeeze=False)
    for ax, metric in zip(axes[0], shown, strict=True):
        part = table[table.metric == metric]
        grid = part.pivot_table(index="layer", columns="arm", values="value", aggfunc="mean")
        grid = grid.reindex(columns=arms)
        image = ax.imshow(grid.to_numpy(float), cmap="magma", aspect="auto", origin="lower")
        if len(arms) <= 12:
            _annotate(ax, image, grid.to_numpy(float))
        ax.set_xticks(range(len(arms)), [_wrap(labels[a]) for a in arms], fontsize=6,
                      rotation=90 if len(arms) > 12 else 0)  # fmt: skip
        ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index])
        hidden = metric in HIDDEN_STATE_MEASURES
        ax.set_ylabel("hidden state (0 = embeddings)" if hidden else "block")
        ax.set_title(DYNAMICS.get(metric, metric), fontsize=8)
        fig.colorbar(image, ax=ax, fraction=0.05)
    fig.suptitle(f"{record.name}, confirm: how far each layer moved (mean over seeds)",
                 fontsize=10)  # fmt: skip
    return save_figure(fig, path)
