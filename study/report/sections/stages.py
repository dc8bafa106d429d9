"""What the intermediate stages did, in a study whose arms train stages before the target: the
learning curve of each stage (each on its own task and dev set, its steps counted from its own
start, the target's beside them), each stage's dev F1 at its end, and how far the encoder had
moved from the pretrained one when each stage ended, so a reader sees how much of the target's
starting point the intermediate stage already changed.

From MLflow alone: a stage's metrics are `stage<i>_<name>` in the trial run, its layer
dynamics `dyn_stage<i>_<measure>` (step = layer), logged with the target's final result.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402

from study.report.arm_styles import arm_styles  # noqa: E402
from study.report.panels import legend_room, panel_figure, panel_legend  # noqa: E402
from study.report.plots import SHORT, metric_label, save_figure  # noqa: E402
from study.report.section import Section, Tables  # noqa: E402
from study.report.text import frame_table, num, stage_sequence  # noqa: E402
from study.tracking.curves import learning_curves, metric_histories  # noqa: E402
from study.tracking.reading import StudyRecord  # noqa: E402
from trainables.settings import stage_prefix  # noqa: E402

CURVES, MOVED, SUMMARY = "stage_curves", "stage_dynamics", "stage_summary"
TARGET = "target"
MEASURES = ("l2_sum", "cka")  # weight distance (blocks) and representation similarity (states)


def stage_curves(record: StudyRecord) -> pd.DataFrame:
    """The study's metric at every evaluation of every stage of every completed confirm trial:
    arm, seed, stage (its name, or `target`), position (0, 1, ...; the target last), step
    (counted from the stage's own start), evaluation, the metric (a column of its name)."""
    metric = record.study_metric[0]
    stages, rows = record.stages, []
    for trial in record.confirm_completed().itertuples():
        for index, name in enumerate(stages.get(trial.arm, [])):
            prefix = stage_prefix(index)
            values, own = metric_histories(record.tracking_uri, trial.run_id,
                                           f"{prefix}{metric}", f"{prefix}step")  # fmt: skip
            for evaluation, step in enumerate(sorted(values)):
                rows.append((trial.arm, trial.seed, name, index, int(own[step]), evaluation,
                             values[step]))  # fmt: skip
    target = learning_curves(record, metric=metric).assign(stage=TARGET)
    target["position"] = [len(stages.get(arm, [])) for arm in target.arm]
    columns = ["arm", "seed", "stage", "position", "step", "evaluation", metric]
    return pd.concat([pd.DataFrame(rows, columns=columns), target[columns]], ignore_index=True)


def stage_dynamics(record: StudyRecord) -> pd.DataFrame:
    """How far each layer was from the pretrained encoder when each stage ended (the target's
    end too), mean over completed confirm seeds: arm, stage, position, measure, layer, value, n."""
    stages, rows = record.stages, []
    for trial in record.confirm_completed().itertuples():
        names = stages.get(trial.arm, [])
        ends = [(name, i, stage_prefix(i)) for i, name in enumerate(names)]
        for name, position, prefix in [*ends, (TARGET, len(names), "")]:
            keys = [f"dyn_{prefix}{measure}" for measure in MEASURES]
            histories = metric_histories(record.tracking_uri, trial.run_id, *keys)
            for measure, values in zip(MEASURES, histories, strict=True):
                rows += [(trial.arm, name, position, measure, int(layer), value, trial.seed)
                         for layer, value in values.items()]  # fmt: skip
    columns = ["arm", "stage", "position", "measure", "layer", "value", "seed"]
    frame = pd.DataFrame(rows, columns=columns)
    means = frame.groupby(columns[:5], sort=False).agg(
        value=("value", "mean"), n=("seed", "nunique")
    )
    return means.reset_index()


def stage_summary(record: StudyRecord, moved: pd.DataFrame) -> pd.DataFrame:
    """Per arm and stage: the study's metric at its end (on its own task's dev set), and the
    encoder's weight distance from the pretrained one then (summed over blocks), as a share
    of the distance at the target's end."""
    metric = record.study_metric[0]
    done, rows = record.confirm_completed(), []
    for arm, names in record.stages.items():
        part = done[done.arm == arm]
        distance = _total_distance(moved, arm)
        final = distance.get(TARGET, float("nan"))
        for index, name in enumerate([*names, TARGET]):
            column = metric if name == TARGET else f"{stage_prefix(index)}{metric}"
            f1 = part[column].dropna() if column in part else pd.Series(dtype=float)
            rows.append(
                {
                    "arm": arm,
                    "stage": name,
                    "n": len(f1),
                    f"{metric} at its end": f"{num(f1.mean())} ± {num(f1.std(ddof=1))}",
                    "weight distance (sum over blocks)": distance.get(name, float("nan")),
                    "share of the target's end": distance.get(name, float("nan")) / final,
                }
            )
    return pd.DataFrame(rows)


def _total_distance(moved: pd.DataFrame, arm: str) -> dict[str, float]:
    part = moved[(moved.arm == arm) & (moved.measure == "l2_sum")]
    return part.groupby("stage", sort=False)["value"].sum().to_dict()


def _tables(record: StudyRecord) -> Tables:
    if not record.stages:
        return {}
    moved = stage_dynamics(record)
    return {
        CURVES: stage_curves(record),
        MOVED: moved,
        SUMMARY: stage_summary(record, moved),
    }


def plot_stage_curves(record: StudyRecord, curves: pd.DataFrame, path: Path) -> Path | None:
    """One panel per stage position (the target last), a line per arm: the mean of the study's
    metric over seeds at each evaluation, at the mean step of that evaluation; many arms: a
    row of those panels per group of arms (`arm_styles`)."""
    metric, mode = record.study_metric
    if curves.empty or metric not in curves:
        return None
    stages = sorted({(p, s) for p, s in zip(curves.position, curves.stage, strict=True)
                     if s != TARGET}) + [(None, TARGET)]  # fmt: skip
    styles = arm_styles(record)
    groups = styles.panels_of(curves.arm)
    tall = 3.4 if len(groups) == 1 else 2.8
    fig, axes = panel_figure(len(groups), per=len(stages), size=(4.0, tall), sharey="col",
                             legend=legend_room(styles, 6))  # fmt: skip
    for row, group in zip(axes, groups, strict=True):
        for ax, (position, stage) in zip(row, stages, strict=True):
            part = curves[curves.stage == stage]
            part = part if position is None else part[part.position == position]
            for arm in group.arms:
                rows, look = part[part.arm == arm], styles[arm]
                if rows.empty:
                    continue
                mean = rows.groupby("evaluation").agg(step=("step", "mean"), value=(metric, "mean"))
                name = styles.name(arm)
                ax.plot(mean.step, mean.value, marker=look.marker, ms=3, color=look.colour,
                        gid=arm, zorder=2 if look.shown else 1, lw=1.5 if look.shown else 0.8,
                        label=f"{name} (n={rows.seed.nunique()})" if name else None)  # fmt: skip
            where = "the target" if stage == TARGET else f"stage {position}: {stage}"
            title = f"{where} (its own dev set)"
            ax.set_title(f"{group.title}\n{title}" if group.title else title, fontsize=8)
            ax.grid(alpha=0.3)
        row[0].set_ylabel(metric_label(metric, mode), fontsize=8)
        panel_legend(row[-1], styles)
    for ax in axes[-1]:
        ax.set_xlabel("optimizer step of the stage")
    fig.suptitle(f"{record.name}, confirm: {SHORT.get(metric, metric)} learning curve of each "
                 "stage, mean over seeds", fontsize=10)  # fmt: skip
    return save_figure(fig, path)


def plot_stage_dynamics(record: StudyRecord, moved: pd.DataFrame, path: Path) -> Path | None:
    """Per measure, a line per (arm, stage end): each layer's distance from the pretrained
    encoder; dashed after an intermediate stage, solid after the target (the legend names the
    arms only: the stages each arm ran are in the section's text); many arms: a row of those
    panels per group of arms."""
    if moved.empty:
        return None
    styles = arm_styles(record)
    groups = styles.panels_of(moved.arm)
    tall = 3.4 if len(groups) == 1 else 2.8
    fig, axes = panel_figure(len(groups), per=len(MEASURES), size=(4.4, tall), sharey="col",
                             legend=legend_room(styles))  # fmt: skip
    titles = {"l2_sum": "weight L2 distance from pretrained, per block",
              "cka": "CKA with pretrained hidden states (1 = same), per state"}  # fmt: skip
    for row, group in zip(axes, groups, strict=True):
        for ax, measure in zip(row, MEASURES, strict=True):
            part = moved[moved.measure == measure]
            for arm in group.arms:  # in the study's order, the legend's too
                look, name = styles[arm], styles.name(arm)
                for stage, rows in part[part.arm == arm].groupby("stage", sort=False):
                    ax.plot(rows.layer, rows.value, "-" if stage == TARGET else "--", ms=3,
                            marker=look.marker, color=look.colour, gid=arm,
                            zorder=2 if look.shown else 1, lw=1.5 if look.shown else 0.8,
                            label=name if stage == TARGET else None)  # fmt: skip
            title = titles[measure]
            ax.set_title(f"{group.title}\n{title}" if group.title else title, fontsize=8)
            ax.grid(alpha=0.3)
        panel_legend(row[-1], styles)
    for ax, measure in zip(axes[-1], MEASURES, strict=True):
        ax.set_xlabel("block" if measure == "l2_sum" else "hidden state (0 = embeddings)")
    fig.suptitle(f"{record.name}, confirm: how far each layer moved by the end of each stage "
                 "(mean over seeds)\ncolour = arm; dashed = after its intermediate stage, "
                 "solid = after the target", fontsize=10)  # fmt: skip
    return save_figure(fig, path)


def _figures(record: StudyRecord, tables: Tables, folder: Path) -> dict[str, Path]:
    if CURVES not in tables:
        return {}
    drawn = {
        CURVES: plot_stage_curves(record, tables[CURVES], folder / f"{CURVES}.png"),
        MOVED: plot_stage_dynamics(record, tables[MOVED], folder / f"{MOVED}.png"),
    }
    return {name: path for name, path in drawn.items() if path is not None}


def _markdown(record: StudyRecord, tables: Tables) -> str:
    if SUMMARY not in tables:
        return ""
    arms = ", ".join(f"`{arm}`: {stage_sequence(names)}" for arm, names in record.stages.items())
    return "\n".join([
        "## Intermediate stages",
        "",
        f"What each arm trained before the target ({arms}). Each stage is scored on its own dev "
        "set at its end; the weight distance is the encoder's from the pretrained one when the "
        "stage ended (sum over blocks of the Q, K, V, out and feed-forward distances), and its "
        "share of the distance at the target's end says how much of where the target left the "
        f"encoder the stage had already moved it. `{CURVES}.csv` has every stage's learning "
        f"curve, `{MOVED}.csv` the per-layer distances and similarities.",
        "",
        frame_table(tables[SUMMARY]),
    ])  # fmt: skip


SECTION = Section(
    name="stages",
    slot="results",
    order=20,
    tables=_tables,
    markdown=_markdown,
    figures=_figures,
    captions={
        CURVES: "Confirm phase: {metric} learning curve of each stage (each on its own task).",
        MOVED: "Confirm phase: how far each layer had moved from the pretrained encoder when "
        "each stage ended.",
    },
)
