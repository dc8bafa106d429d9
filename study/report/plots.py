"""The report's figures, drawn from the tables of `study.tracking.reading` with matplotlib.

Each function writes one PNG and returns its path, or None when the study has nothing to
show for it (no searched lr, fewer than two grid factors, ...). Figures are meant to be read
at a glance in a paper appendix: every one has a title, labelled axes with units and a legend.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers and CI
import matplotlib.image  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from study.names import CONFIRM, EXPLORE  # noqa: E402
from study.report.readable import MIN_PT, make_readable  # noqa: E402
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


PAGE_IN = 18.0  # widest figure of side-by-side panels, in inches; more panels wrap to a new row
MARKERS = "osD^v"


def arm_colors(arms: list[str]) -> dict[str, tuple]:
    """tab10 up to ten arms, tab20 beyond (past 20, `arm_markers` tells the repeats apart);
    neither map has black, which the figures keep for medians and the baseline."""
    cmap = plt.get_cmap("tab10" if len(arms) <= 10 else "tab20")
    return {arm: cmap(i % cmap.N) for i, arm in enumerate(arms)}


def arm_markers(arms: list[str]) -> dict[str, str]:
    """One marker per round of the colour map, so no two arms share colour and marker."""
    per = 10 if len(arms) <= 10 else 20
    return {arm: MARKERS[(i // per) % len(MARKERS)] for i, arm in enumerate(arms)}


def subplots(*args, **kwargs):
    """`plt.subplots` under constrained layout, which keeps suptitles, colour bars and the
    legends beside the axes clear of everything else."""
    return plt.subplots(*args, layout="constrained", **kwargs)


def arm_legend(axes: list, **kwargs) -> None:
    """The legend of a figure's panels, drawn once its lines are: inside each panel for a few
    entries; for many (36 arms inside would hide the data), one for the figure, beside the
    panels in columns of at most 18, with the figure widened to hold it."""
    entries: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    if len(entries) <= 6:
        for ax in axes:
            if ax.get_legend_handles_labels()[1]:
                ax.legend(fontsize=8, **kwargs)
        return
    fig = axes[0].figure
    columns = math.ceil(len(entries) / 18)
    fig.legend(list(entries.values()), list(entries), fontsize=MIN_PT, ncol=columns,
               loc="outside right upper", **kwargs)  # fmt: skip
    width, height = fig.get_size_inches()
    fig.set_size_inches(width + columns * (0.06 * max(map(len, entries)) + 0.6), height)


def text_colour(rgba) -> str:
    """Black or white, whichever reads on a cell of colour `rgba` (relative luminance as in
    WCAG 2: black above 0.4, where it has the better contrast)."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgba[:3]]
    luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return "black" if luminance > 0.179 else "white"


def save_figure(fig: Figure, path: Path) -> Path:
    """Every figure of the report is laid out, written and closed alike (closed: a report
    draws dozens, and pyplot keeps each open figure's memory). Laid out so that no two words
    overlap: see study/report/readable.py."""
    fig.set_dpi(DPI)
    make_readable(fig)  # ends with the figure drawn as it is to be written
    # the pixels of that last drawing, written as savefig would write them: savefig would draw
    # the whole figure again, which was half of a report's time spent on figures
    matplotlib.image.imsave(path, np.asarray(fig.canvas.buffer_rgba()), dpi=DPI)
    plt.close(fig)
    return path


def lr_vs_f1(record: StudyRecord, path: Path) -> Path | None:
    """Explore phase: dev F1 against the learning rate, one colour per arm, one point per
    seed; the line joins the seed means of completed trials only. A pruned trial's value is
    from an earlier epoch than a final one, so it is a hollow marker, kept out of the line."""
    t = record.trials
    explore = t[(t.phase == EXPLORE) & t.status.isin(["completed", "pruned"])]
    if explore.empty or "lr" not in record.searched or "dev_f1" not in explore:
        return None
    arms = list(record.arms)
    fig, ax = subplots(figsize=(7.5, 4.5))
    colors, markers, labels = arm_colors(arms), arm_markers(arms), arm_labels(record)
    for arm, rows in explore.groupby("arm", sort=False):
        rows = rows.assign(lr=rows.lr.astype(float))
        done, pruned = rows[rows.status == "completed"], rows[rows.status != "completed"]
        style = {"marker": markers[arm], "s": 28}
        ax.scatter(done.lr, done.dev_f1, color=colors[arm], label=labels[arm], **style)
        ax.scatter(pruned.lr, pruned.dev_f1, facecolors="none", edgecolors=colors[arm], **style)
        means = done.groupby("lr").dev_f1.mean()
        ax.plot(means.index, means.to_numpy(), color=colors[arm], alpha=0.6)
    kinds = [plt.Line2D([], [], color="black", marker="o", ls="-", label="completed (line: mean)"),
             plt.Line2D([], [], color="black", marker="o", mfc="none", ls="none",
                        label="pruned: value at its last evaluation, not in the line")]  # fmt: skip
    ax.add_artist(ax.legend(handles=kinds, fontsize=MIN_PT, loc="lower right"))
    ax.set_xscale("log")
    ax.set_xlabel("learning rate (log scale)")
    ax.set_ylabel(LABELS["dev_f1"])
    ax.set_title(f"{record.name}, explore: dev F1 vs learning rate per arm", fontsize=10)
    ax.grid(alpha=0.3)
    arm_legend([ax], title="arm")
    return save_figure(fig, path)


KEPT_MARKER = "*"  # the checkpoint a trial kept for test: no arm's marker (MARKERS) has it


def learning_curves(curves: pd.DataFrame, record: StudyRecord, path: Path) -> Path | None:
    """Confirm phase: dev F1 over optimizer steps per arm, as the evaluations made it (the
    rows of `study.tracking.reading.learning_curves`): a thin line per seed, to its own last
    evaluation; a thick line for the mean over seeds, aligned by evaluation index and drawn
    only as far as every seed of the arm evaluated (a mean over the seeds still training
    would change its members where one stops), its n in the legend; and a star for the
    checkpoint each seed kept for test, at its step (`kept_checkpoints`), apart from the
    line. One colour per arm, as in every figure (`arm_colors`)."""
    if curves.empty:
        return None
    arms = list(record.arms)
    fig, ax = subplots(figsize=(7.5, 4.5))
    colors, markers, labels = arm_colors(arms), arm_markers(arms), arm_labels(record)
    key = _trial_key(curves)
    kept = kept_checkpoints(curves, record)
    for arm, rows in curves.groupby("arm", sort=False):
        for _, own in rows.groupby(key, sort=False):
            own = own.sort_values("evaluation")
            ax.plot(own.step, own.dev_f1, color=colors[arm], lw=0.8, alpha=0.45, zorder=2)
        whole = mean_while_all_train(rows, key)
        n = rows.groupby(key).ngroups
        unit = "seeds" if n == rows.seed.nunique() else "trials"
        ax.plot(whole.step, whole["mean"], marker=markers[arm], ms=3, lw=2, color=colors[arm],
                zorder=3, label=f"{labels[arm]} (mean of n={n} {unit})")  # fmt: skip
        own_kept = kept[kept.arm == arm]
        ax.scatter(own_kept.step, own_kept.dev_f1, marker=KEPT_MARKER, s=70, color=colors[arm],
                   edgecolors="black", linewidths=0.6, zorder=4)  # fmt: skip
    kinds = [plt.Line2D([], [], color="black", lw=0.8, alpha=0.6,
                        label="one seed: dev F1 at each evaluation"),
             plt.Line2D([], [], color="black", lw=2, label="mean, while every seed trains"),
             plt.Line2D([], [], color="white", marker=KEPT_MARKER, ms=9, mec="black", ls="none",
                        label="checkpoint kept for test (its dev F1)")]  # fmt: skip
    # under the panel: inside, where the arms' legend may also go, the two could meet
    fig.legend(handles=kinds, fontsize=MIN_PT, ncol=3, loc="outside lower center")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(LABELS["dev_f1"])
    ax.set_title(f"{record.name}, confirm: dev-F1 learning curves\n(evaluations as made; "
                 "star = the checkpoint each seed kept)", fontsize=10)  # fmt: skip
    ax.grid(alpha=0.3)
    arm_legend([ax])
    return save_figure(fig, path)


def _trial_key(curves: pd.DataFrame) -> str:
    """What tells one trial's curve from another's: its run, else (hand-made tables, reports
    from before the column) its seed."""
    return "run_id" if "run_id" in curves else "seed"


def mean_while_all_train(rows: pd.DataFrame, key: str = "seed") -> pd.DataFrame:
    """One arm's mean dev F1 at each evaluation index that all its trials reached (their
    first evaluations to the shortest trial's last): evaluation, step (mean over trials),
    mean, n."""
    by_eval = rows.groupby("evaluation").agg(step=("step", "mean"), mean=("dev_f1", "mean"),
                                             n=(key, "nunique"))  # fmt: skip
    return by_eval[by_eval.n == rows[key].nunique()].reset_index()


def kept_checkpoints(curves: pd.DataFrame, record: StudyRecord) -> pd.DataFrame:
    """Per trial drawn in `curves`, the checkpoint it kept for test: arm, seed, step, dev_f1
    (the trial's reported dev F1, its kept weights scored on dev). The step is its
    `best_step` where it kept earlier weights (`until_plateau`: those of its best evaluation
    on the smoothed curve), else its last evaluation's: it kept the weights it ended with."""
    key = _trial_key(curves)
    t = record.trials
    done = t[(t.phase == CONFIRM) & (t.status == "completed")]
    last = curves.sort_values("evaluation").groupby(["arm", key], sort=False).step.last()
    rows = []
    for trial in done.itertuples():
        ended = last.get((trial.arm, getattr(trial, key)))
        if ended is None or "dev_f1" not in done:
            continue
        best = getattr(trial, "best_step", math.nan)
        step = ended if best is None or math.isnan(float(best)) else float(best)
        rows.append((trial.arm, trial.seed, step, float(trial.dev_f1)))
    return pd.DataFrame(rows, columns=["arm", "seed", "step", "dev_f1"])


def seed_distributions(record: StudyRecord, path: Path) -> Path | None:
    """Confirm phase: every seed's value per arm and metric as a box with the points over it;
    grey lines join one seed across arms, since the comparisons are paired by seed. The
    median is black, a colour no arm has. Panels side by side for a few arms, wrapped onto
    rows at a page's width, stacked for many (one arm per column of text)."""
    done = record.confirm_completed()
    metrics = [m for m in record.metrics if m in done and done[m].notna().any()]
    if done.empty or not metrics:
        return None
    arms = [a for a in record.arms if a in set(done.arm)]
    many = len(arms) > 6
    if many:
        shape, size = (len(metrics), 1), (max(7.0, 0.22 * len(arms) + 2), 2.4 * len(metrics))
    else:
        panel = 1.4 * len(arms) + 0.6
        columns = max(1, min(len(metrics), int(PAGE_IN // panel)))
        rows = -(-len(metrics) // columns)
        shape, size = (rows, columns), (panel * columns + 1.4, 4.2 * rows)
    fig, axes = subplots(*shape, figsize=size, squeeze=False, sharex=many)
    for ax in axes.flat[len(metrics) :]:
        ax.set_visible(False)
    colors, labels = arm_colors(list(record.arms)), arm_labels(record)
    for ax, metric in zip(axes.flat[: len(metrics)], metrics, strict=True):
        table = done.pivot_table(index="seed", columns="arm", values=metric).reindex(columns=arms)
        ax.boxplot([table[a].dropna() for a in arms], widths=0.5, showfliers=False,
                   medianprops={"color": "black", "lw": 1.5})  # fmt: skip
        for _, values in table.iterrows():
            ax.plot(range(1, len(arms) + 1), values.to_numpy(), color="grey", alpha=0.4, lw=0.8)
        for i, arm in enumerate(arms, start=1):
            ax.scatter(np.full(len(table), i), table[arm], color=colors[arm], s=18, zorder=3)
        names = [labels[a] if many else _wrap(labels[a]) for a in arms]
        ax.set_xticks(range(1, len(arms) + 1), names, fontsize=MIN_PT, rotation=90 if many else 0)
        if many:
            ax.set_ylabel(SHORT.get(metric, metric), fontsize=9)
        else:
            ax.set_title(SHORT.get(metric, metric), fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(f"{record.name}, confirm: per-seed values by arm\n(grey lines join one seed, "
                 "black bar = median, box = quartiles)", fontsize=10)  # fmt: skip
    return save_figure(fig, path)


def _annotate(ax, image, values: np.ndarray, digits: str = ".3g") -> None:
    """Cell values in the colour that reads on the cell (`text_colour`)."""
    for (i, j), value in np.ndenumerate(values):
        if np.isfinite(value):
            ax.text(j, i, f"{value:{digits}}", ha="center", va="center", fontsize=MIN_PT,
                    color=text_colour(image.cmap(image.norm(value))))  # fmt: skip


def _wrap(arm: str) -> str:
    return arm.replace(", ", "\n")


def factor_heatmap(record: StudyRecord, metric: str, path: Path) -> Path | None:
    """Mean confirm metric over two grid factors (e.g. reinit k x data fraction), when the
    grid has two factors with several values each. The baseline's cells are outlined in
    black and its tick says so; each number is black or white to read on its cell."""
    grid = {k: v for k, v in record.grid.items() if len(v) > 1}
    done = record.confirm_completed()
    if len(grid) != 2 or done.empty or metric not in done:
        return None
    rows, cols = list(grid)
    baseline = json.loads(record.tags.get("compare_baseline") or "{}")
    marked = {k: factor_text(k, v) for k, v in baseline.items() if k in grid}
    if INTERMEDIATE in grid:  # lists of stages, by their names (a list is no pivot key)
        grid[INTERMEDIATE] = [factor_text(INTERMEDIATE, v) for v in grid[INTERMEDIATE]]
        done = done.assign(**{INTERMEDIATE: done[INTERMEDIATE].map(stage_label)})
    table = done.pivot_table(index=rows, columns=cols, values=metric, aggfunc="mean")
    table = table.reindex(index=grid[rows], columns=grid[cols])
    counts = done.pivot_table(index=rows, columns=cols, values=metric, aggfunc="count")
    counts = counts.reindex(index=grid[rows], columns=grid[cols]).to_numpy()
    values = table.to_numpy(float)
    fig, ax = subplots(figsize=(1.2 * len(grid[cols]) + 3, 0.5 * len(grid[rows]) + 2.2))
    image = ax.imshow(values, cmap="viridis", aspect="auto")
    for (i, j), value in np.ndenumerate(values):
        text = "n/a" if np.isnan(value) else f"{value:.3f}\n(n={int(counts[i, j])})"
        colour = "black" if np.isnan(value) else text_colour(image.cmap(image.norm(value)))
        ax.text(j, i, text, ha="center", va="center", color=colour, fontsize=MIN_PT)
    for (i, j), _ in np.ndenumerate(values):
        at = {rows: str(grid[rows][i]), cols: str(grid[cols][j])}
        if marked and all(at[k] == str(v) for k, v in marked.items()):
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="black", lw=2.5))
    ax.set_xticks(range(len(grid[cols])), [_baseline_tick(cols, v, marked) for v in grid[cols]])
    ax.set_yticks(range(len(grid[rows])), [_baseline_tick(rows, v, marked) for v in grid[rows]])
    ax.set_xlabel(cols)
    ax.set_ylabel(rows)
    fig.colorbar(image, ax=ax, label=f"mean {LABELS.get(metric, metric)}")
    outlined = "; black outline = the baseline" if marked else ""
    ax.set_title(f"{record.name}, confirm: mean {metric} over seeds{outlined}", fontsize=10)
    return save_figure(fig, path)


def _baseline_tick(factor: str, value, marked: dict[str, str]) -> str:
    return f"{value} (baseline)" if marked.get(factor) == str(value) else str(value)


DYNAMICS = {  # panel titles, two short lines: four panels share the figure's width
    "l2_sum": "weight L2 distance from pretrained\n(sum of Q, K, V, out, FFN)",
    "attn_js": "attention JS divergence\nfrom pretrained (nats)",
    "cka": "linear CKA with pretrained\nhidden states (1 = same)",
    "svcca": "SVCCA distance from pretrained\nhidden states (0 = same)",
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


SIMILARITIES = ("cka",)  # higher = more alike; every other measure is a distance
LOG_SCALED = ("l2_sum",)  # re-drawn blocks move ~100x more than fine-tuned ones
LOG_RANGE = 1e4  # a log scale spans at most this factor; smaller values (0 too) at its end


def dynamics_heatmaps(table: pd.DataFrame, record: StudyRecord, path: Path) -> Path | None:
    """Layer x arm heatmaps of how far each layer moved, mean over seeds, one panel per
    measure (stacked for many arms). CKA/SVCCA rows are hidden states (0 = embeddings), the
    others blocks. Bright = unchanged in every panel, as bright = alike in the layers_*
    figures; the weight distance is on a log scale, so re-drawn blocks leave no cell black."""
    shown = dynamics_measures(set(table.metric)) if not table.empty else []
    if not shown:
        return None
    labels = arm_labels(record)
    arms = [a for a in record.arms if a in set(table.arm)]
    few = len(arms) <= 12
    if few:  # panels side by side, numbers in the cells
        shape, size = (1, len(shown)), ((0.9 * len(arms) + 2.2) * len(shown), 5.2)
    else:  # stacked, one arm per column of text under the lowest
        shape, size = (len(shown), 1), (0.16 * len(arms) + 3.2, 2.6 * len(shown) + 2.5)
    fig, axes = subplots(*shape, figsize=size, squeeze=False, sharex=not few)
    for ax, metric in zip(axes.flat, shown, strict=True):
        part = table[table.metric == metric]
        grid = part.pivot_table(index="layer", columns="arm", values="value", aggfunc="mean")
        values = grid.reindex(columns=arms).to_numpy(float)
        cmap = "viridis" if metric in SIMILARITIES else "viridis_r"
        norm = _log_norm(values) if metric in LOG_SCALED else None
        image = ax.imshow(values, cmap=cmap, norm=norm, aspect="auto", origin="lower")
        if few:
            _annotate(ax, image, values)
        names = [_wrap(labels[a]) if few else labels[a] for a in arms]
        ax.set_xticks(range(len(arms)), names, fontsize=MIN_PT, rotation=0 if few else 90)
        ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index])
        hidden = metric in HIDDEN_STATE_MEASURES
        ax.set_ylabel("hidden state (0 = embeddings)" if hidden else "block")
        ax.set_title(DYNAMICS.get(metric, metric), fontsize=8)
        scale = ", log scale" if norm is not None else ""
        fig.colorbar(image, ax=ax, fraction=0.05, label=f"bright = unchanged{scale}")
    fig.suptitle(f"{record.name}, confirm: how far each layer moved (mean over seeds; "
                 "bright = unchanged)", fontsize=10)  # fmt: skip
    return save_figure(fig, path)


def _log_norm(values: np.ndarray) -> LogNorm | None:
    """A log scale over the positive values, spanning at most `LOG_RANGE`; values below it
    (a block that did not move at all: 0) are drawn at its bright end. None when no value
    is positive."""
    positive = values[np.isfinite(values) & (values > 0)]
    if positive.size == 0:
        return None
    high = float(positive.max())
    return LogNorm(vmin=max(float(positive.min()), high / LOG_RANGE), vmax=high, clip=True)
