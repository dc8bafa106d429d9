"""The report's figures, drawn from the tables of `study.tracking.reading` and
`study.tracking.curves` with matplotlib.

Each function writes one PNG and returns its path, or None when the study has nothing to
show for it (no searched lr, fewer than two grid factors, ...). Figures are meant to be read
at a glance in a paper appendix: every one has a title naming the study, labelled axes with
units and a legend. Every arm has one name, colour and marker in all of them, and a figure of
many arms is split into panels of a few (study/report/arm_styles.py); where a figure plots
"the metric" it is the study's own, named with its direction (`metric_label`).
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

from study.names import CONFIRM, EXPLORE, factor_value  # noqa: E402
from study.report.arm_styles import arm_styles  # noqa: E402
from study.report.panels import (  # noqa: E402
    label_outer,
    legend_room,
    panel_figure,
    panel_legend,
    subplots,
)
from study.report.readable import MIN_PT, make_readable  # noqa: E402
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
PAGE_IN = 18.0  # widest figure of side-by-side panels, in inches; more panels wrap to a new row


def metric_label(name: str, mode: str) -> str:
    """A metric as an axis names it, with the direction that is better: the study's own metric
    is `dev_loss` in one study and dev F1 in another, and a reader must not guess which way
    is up."""
    return f"{SHORT.get(name, name)}, {'lower' if mode == 'min' else 'higher'} = better"


def line_panels(count: int, legend: float, **share):
    """The figure of a line plot's `count` panels (`panels.panel_figure`), each with `legend`
    inches of legend beside it: one as large as a page column reads it; small multiples
    smaller, two to a row."""
    if count == 1:
        return panel_figure(1, size=(6.0, 3.8), legend=legend, **share)
    return panel_figure(count, size=(4.0, 2.6), columns=2, legend=legend, **share)


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
    """Explore phase: the study's metric against the learning rate, one colour per arm, one
    point per seed; the line joins the seed means of completed trials only. A pruned trial's
    value is from an earlier epoch than a final one, so it is a hollow marker, kept out of the
    line. Many arms: a panel per group of arms (`arm_styles`), on shared axes."""
    metric, mode = record.study_metric
    t = record.trials
    explore = t[(t.phase == EXPLORE) & t.status.isin(["completed", "pruned"])]
    if explore.empty or "lr" not in record.searched or metric not in explore:
        return None
    styles = arm_styles(record)
    panels = styles.panels_of(explore.arm)
    fig, axes = line_panels(len(panels), legend_room(styles), sharex=True, sharey=True)
    for (ax,), panel in zip(axes, panels, strict=True):
        for arm in panel.arms:
            rows = explore[explore.arm == arm].assign(lr=lambda r: r.lr.astype(float))
            look = styles[arm]
            done, pruned = rows[rows.status == "completed"], rows[rows.status != "completed"]
            kind = {"marker": look.marker or ".", "s": 24 if look.shown else 8, "gid": arm,
                    "zorder": 3 if look.shown else 1}  # fmt: skip
            ax.scatter(done.lr, done[metric], color=look.colour, label=styles.name(arm), **kind)
            ax.scatter(pruned.lr, pruned[metric], facecolors="none", edgecolors=look.colour,
                       **kind)  # fmt: skip
            means = done.groupby("lr")[metric].mean()
            ax.plot(means.index, means.to_numpy(), color=look.colour, gid=arm,
                    alpha=0.6 if look.shown else 0.4, zorder=kind["zorder"])  # fmt: skip
        ax.set_xscale("log")
        ax.set_title(panel.title, fontsize=8)
        ax.grid(alpha=0.3)
        panel_legend(ax, styles, title="arm" if len(panels) == 1 else None)
    label_outer(axes, "learning rate (log scale)", metric_label(metric, mode))
    kinds = [plt.Line2D([], [], color="black", marker="o", ls="-", label="completed (line: mean)"),
             plt.Line2D([], [], color="black", marker="o", mfc="none", ls="none",
                        label="pruned: value at its last evaluation, not in the line")]  # fmt: skip
    fig.legend(handles=kinds, fontsize=MIN_PT, ncol=2 if len(panels) > 1 else 1,
               loc="outside lower center")  # fmt: skip
    short = SHORT.get(metric, metric)
    fig.suptitle(f"{record.name}, explore: {short} vs learning rate per arm", fontsize=10)
    return save_figure(fig, path)


KEPT_MARKER = "*"  # the checkpoint a trial kept for test: no arm's marker (arm_styles) has it


def learning_curves(curves: pd.DataFrame, record: StudyRecord, path: Path) -> Path | None:
    """Confirm phase: the study's metric over optimizer steps per arm, as the evaluations made
    it (the rows of `study.tracking.curves.learning_curves`): a thin line per seed, to its
    own last evaluation; a thick line for the mean over seeds, aligned by evaluation index and
    drawn only as far as every seed of the arm evaluated (a mean over the seeds still training
    would change its members where one stops), its n in the legend; and a star for the
    checkpoint each seed kept for test, at its step (`kept_checkpoints`), apart from the
    line. One look per arm, as in every figure; many arms: a panel per group of arms."""
    metric, mode = record.study_metric
    if curves.empty or metric not in curves:
        return None
    styles = arm_styles(record)
    panels = styles.panels_of(curves.arm)
    fig, axes = line_panels(len(panels), legend_room(styles, 13), sharex=True, sharey=True)
    key = _trial_key(curves)
    kept = kept_checkpoints(curves, record)
    for (ax,), panel in zip(axes, panels, strict=True):
        for arm in panel.arms:
            rows, look = curves[curves.arm == arm], styles[arm]
            if not look.shown:  # one of the many: its mean alone, in grey
                whole = mean_while_all_train(rows, key, metric)
                ax.plot(whole.step, whole["mean"], color=look.colour, lw=0.8, zorder=1, gid=arm)
                continue
            for _, own in rows.groupby(key, sort=False):
                own = own.sort_values("evaluation")
                ax.plot(own.step, own[metric], color=look.colour, lw=0.8, alpha=0.45, zorder=2,
                        gid=arm)  # fmt: skip
            whole = mean_while_all_train(rows, key, metric)
            n = rows.groupby(key).ngroups
            unit = "seeds" if n == rows.seed.nunique() else "trials"
            name = f"{styles.name(arm)} (n={n} {unit})"
            ax.plot(whole.step, whole["mean"], marker=look.marker, ms=3, lw=2, zorder=3,
                    color=look.colour, gid=arm, label=name)  # fmt: skip
            own_kept = kept[kept.arm == arm]
            ax.scatter(own_kept.step, own_kept[metric], marker=KEPT_MARKER, s=70, zorder=4,
                       color=look.colour, edgecolors="black", linewidths=0.6, gid=arm)  # fmt: skip
        ax.set_title(panel.title, fontsize=8)
        ax.grid(alpha=0.3)
        panel_legend(ax, styles)
    label_outer(axes, "optimizer step", metric_label(metric, mode))
    short = SHORT.get(metric, metric)
    kinds = [plt.Line2D([], [], color="black", lw=0.8, alpha=0.6,
                        label=f"one seed: {short} at each evaluation"),
             plt.Line2D([], [], color="black", lw=2,
                        label="mean over seeds (n), while every seed trains"),
             plt.Line2D([], [], color="white", marker=KEPT_MARKER, ms=9, mec="black", ls="none",
                        label=f"checkpoint kept for test (its {short})")]  # fmt: skip
    fig.legend(handles=kinds, fontsize=MIN_PT, ncol=3 if len(panels) > 1 else 1,
               loc="outside lower center")  # fmt: skip
    fig.suptitle(f"{record.name}, confirm: {short} learning curves\n(evaluations as made; "
                 "star = the checkpoint each seed kept)", fontsize=10)  # fmt: skip
    return save_figure(fig, path)


def _trial_key(curves: pd.DataFrame) -> str:
    """What tells one trial's curve from another's: its run, else (hand-made tables, reports
    from before the column) its seed."""
    return "run_id" if "run_id" in curves else "seed"


def mean_while_all_train(
    rows: pd.DataFrame, key: str = "seed", metric: str = "dev_f1"
) -> pd.DataFrame:
    """One arm's mean `metric` at each evaluation index that all its trials reached (their
    first evaluations to the shortest trial's last): evaluation, step (mean over trials),
    mean, n."""
    by_eval = rows.groupby("evaluation").agg(step=("step", "mean"), mean=(metric, "mean"),
                                             n=(key, "nunique"))  # fmt: skip
    return by_eval[by_eval.n == rows[key].nunique()].reset_index()


def kept_checkpoints(curves: pd.DataFrame, record: StudyRecord) -> pd.DataFrame:
    """Per trial drawn in `curves`, the checkpoint it kept for test: arm, seed, step and the
    study's metric (the trial's reported value, its kept weights scored on dev). The step is
    its `best_step` where it kept earlier weights (`until_plateau`: those of its best
    evaluation on the smoothed curve), else its last evaluation's: it kept the weights it
    ended with."""
    metric = record.study_metric[0]
    key = _trial_key(curves)
    t = record.trials
    done = t[(t.phase == CONFIRM) & (t.status == "completed")]
    last = curves.sort_values("evaluation").groupby(["arm", key], sort=False).step.last()
    rows = []
    for trial in done.itertuples():
        ended = last.get((trial.arm, getattr(trial, key)))
        if ended is None or metric not in done:
            continue
        best = getattr(trial, "best_step", math.nan)
        step = ended if best is None or math.isnan(float(best)) else float(best)
        rows.append((trial.arm, trial.seed, step, float(getattr(trial, metric))))
    return pd.DataFrame(rows, columns=["arm", "seed", "step", metric])


def seed_distributions(record: StudyRecord, path: Path) -> Path | None:
    """Confirm phase: every seed's value per arm and metric as a box with the points over it;
    grey lines join one seed across the arms of a group, since the comparisons are paired by
    seed. The median is black, a colour no arm has. A few arms: a panel per metric, side by
    side, wrapped onto rows at a page's width. Many: the boxes lying down, a panel per metric
    with the arms named once at the left, in bands of the groups of `arm_styles` (a line
    between bands), so a seed's line joins a few boxes, not dozens, and no name stands on
    end. Past the best few arms (grey in the other figures), only those few."""
    done = record.confirm_completed()
    metrics = [m for m in record.metrics if m in done and done[m].notna().any()]
    if done.empty or not metrics:
        return None
    styles = arm_styles(record)
    groups = [[a for a in group.arms if styles[a].shown] for group in styles.panels_of(done.arm)]
    lying = len(groups) > 1
    arms = [arm for arms in groups for arm in arms]
    # each arm's place along the arm axis: 1, 2, ...; a half step more between bands
    place = {arm: i + 1 + 0.5 * band for band, own in enumerate(groups)
             for i, arm in enumerate(own, start=sum(len(g) for g in groups[:band]))}  # fmt: skip
    if lying:
        size = (2.6 * len(metrics) + 2.4, 0.24 * len(arms) + 1.6)
        fig, grid = subplots(1, len(metrics), sharey=True, squeeze=False, figsize=size)
    else:
        width = 1.4 * len(arms) + 0.6
        columns = max(1, min(len(metrics), int(PAGE_IN // width)))
        rows = -(-len(metrics) // columns)
        fig, grid = subplots(rows, columns, figsize=(width * columns + 1.4, 4.2 * rows),
                             squeeze=False)  # fmt: skip
    for ax in grid.flat[len(metrics) :]:
        ax.set_visible(False)
    for ax, metric in zip(grid.flat, metrics, strict=False):
        table = done.pivot_table(index="seed", columns="arm", values=metric).reindex(columns=arms)
        at = [place[a] for a in arms]
        ax.boxplot([table[a].dropna() for a in arms], positions=at, widths=0.5,
                   showfliers=False, orientation="horizontal" if lying else "vertical",
                   medianprops={"color": "black", "lw": 1.5})  # fmt: skip
        for own in groups:
            spots = [place[a] for a in own]
            for _, values in table[own].iterrows():
                xy = (values.to_numpy(), spots) if lying else (spots, values.to_numpy())
                ax.plot(*xy, color="grey", alpha=0.4, lw=0.8)
        for arm in arms:
            here = np.full(len(table), place[arm])
            xy = (table[arm], here) if lying else (here, table[arm])
            ax.scatter(*xy, color=styles[arm].colour, s=18, marker=styles[arm].marker, zorder=3,
                       gid=arm)  # fmt: skip
        ax.set_title(SHORT.get(metric, metric), fontsize=8)
        if lying:
            ax.set_yticks(at, [styles[a].label for a in arms], fontsize=MIN_PT)
            ax.set_ylim(max(at) + 0.6, 0.4)  # the study's first arm on top
            for own in groups[1:]:
                ax.axhline(place[own[0]] - 0.75, color="black", lw=0.6)
            ax.grid(alpha=0.3, axis="x")
        else:
            ax.set_xticks(at, [_wrap(styles[a].label) for a in arms], fontsize=MIN_PT)
            ax.grid(alpha=0.3, axis="y")
    only = f"; the best {len(arms)} of {len(record.arms)} arms by {record.study_metric[0]}"
    fig.suptitle(f"{record.name}, confirm: per-seed values by arm{only if styles.others else ''}"
                 "\n(grey lines join one seed, black bar = median, box = quartiles)",
                 fontsize=10)  # fmt: skip
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
    marked = {k: factor_value(k, v) for k, v in baseline.items() if k in grid}
    shown = {k: [factor_value(k, v) for v in values] for k, values in grid.items()}
    if INTERMEDIATE in grid:  # lists of stages, by their names (a list is no pivot key)
        grid[INTERMEDIATE] = shown[INTERMEDIATE]
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
        at = {rows: shown[rows][i], cols: shown[cols][j]}
        if marked and all(at[k] == v for k, v in marked.items()):
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="black", lw=2.5))
    ax.set_xticks(range(len(grid[cols])), [_baseline_tick(cols, v, marked) for v in shown[cols]])
    ax.set_yticks(range(len(grid[rows])), [_baseline_tick(rows, v, marked) for v in shown[rows]])
    ax.set_xlabel(cols)
    ax.set_ylabel(rows)
    fig.colorbar(image, ax=ax, label=f"mean {LABELS.get(metric, metric)}")
    outlined = "; black outline = the baseline" if marked else ""
    ax.set_title(f"{record.name}, confirm: mean {metric} over seeds{outlined}", fontsize=10)
    return save_figure(fig, path)


def _baseline_tick(factor: str, text: str, marked: dict[str, str]) -> str:
    return f"{text} (baseline)" if marked.get(factor) == text else text


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
    labels = arm_styles(record).labels()
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
