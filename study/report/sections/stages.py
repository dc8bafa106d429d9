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

from study.report.plots import arm_colors, arm_legend, arm_markers, save_figure, subplots  # noqa: E402
from study.report.section import Section, Tables  # noqa: E402
from study.report.text import frame_table, num, stage_sequence  # noqa: E402
from study.tracking.reading import (  # noqa: E402
    StudyRecord,
    learning_curves,
    metric_histories,
)
from trainables.settings import stage_prefix  # noqa: E402

CURVES, MOVED, SUMMARY = "stage_curves", "stage_dynamics", "stage_summary"
TARGET = "target"
MEASURES = ("l2_sum", "cka")  # weight distance (blocks) and representation similarity (states)


def stage_curves(record: StudyRecord) -> pd.DataFrame:
    """Dev F1 at every evaluation of every stage of every completed confirm trial: arm, seed,
    stage (its name, or `target`), position (0, 1, ...; the target last), step (counted from
    the stage's own start), evaluation, dev_f1."""
    stages, rows = record.stages, []
    for trial in record.confirm_completed().itertuples():
        for index, name in enumerate(stages.get(trial.arm, [])):
            prefix = stage_prefix(index)
            f1, own = metric_histories(record.tracking_uri, trial.run_id,
                                       f"{prefix}dev_f1", f"{prefix}step")  # fmt: skip
            for evaluation, step in enumerate(sorted(f1)):
                rows.append((trial.arm, trial.seed, name, index, int(own[step]), evaluation,
                             f1[step]))  # fmt: skip
    target = learning_curves(record).assign(stage=TARGET)
    target["position"] = [len(stages.get(arm, [])) for arm in target.arm]
    columns = ["arm", "seed", "stage", "position", "step", "evaluation", "dev_f1"]
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
    """Per arm and stage: its dev F1 at its end (on its own task), and the encoder's weight
    distance from the pretrained one then (summed over blocks), as a share of the distance at
    the target's end."""
    done, rows = record.confirm_completed(), []
    for arm, names in record.stages.items():
        part = done[done.arm == arm]
        distance = _total_distance(moved, arm)
        final = distance.get(TARGET, float("nan"))
        for index, name in enumerate([*names, TARGET]):
            column = "dev_f1" if name == TARGET else f"{stage_prefix(index)}dev_f1"
            f1 = part[column].dropna() if column in part else pd.Series(dtype=float)
            rows.append(
                {
                    "arm": arm,
                    "stage": name,
                    "n": len(f1),
                    "dev_f1 at its end": f"{num(f1.mean())} ± {num(f1.std(ddof=1))}",
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


def plot_stage_curves(curves: pd.DataFrame, path: Path) -> Path | None:
    """One panel per stage position (the target last), a line per arm: mean dev F1 over seeds
    at each evaluation, at the mean step of that evaluation."""
    if curves.empty:
        return None
    panels = sorted({(p, s) for p, s in zip(curves.position, curves.stage, strict=True)
                     if s != TARGET}) + [(None, TARGET)]  # fmt: skip
    fig, axes = subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8), squeeze=False)
    arms = list(dict.fromkeys(curves.arm))
    colors, markers = arm_colors(arms), arm_markers(arms)
    for ax, (position, stage) in zip(axes[0], panels, strict=True):
        part = curves[curves.stage == stage]
        part = part if position is None else part[part.position == position]
        for arm, rows in part.groupby("arm", sort=False):
            mean = rows.groupby("evaluation").agg(step=("step", "mean"), f1=("dev_f1", "mean"))
            ax.plot(mean.step, mean.f1, marker=markers[arm], ms=3, color=colors[arm],
                    label=f"{arm} (n={rows.seed.nunique()})")  # fmt: skip
        where = "the target" if stage == TARGET else f"stage {position}: {stage}"
        ax.set_title(f"{where} (its own dev set)", fontsize=9)
        ax.set_xlabel("optimizer step of the stage")
        ax.set_ylabel("dev F1 (conlleval)")
        ax.grid(alpha=0.3)
    arm_legend(list(axes[0]))
    fig.suptitle("Confirm phase: dev-F1 learning curve of each stage, mean over seeds",
                 fontsize=10)  # fmt: skip
    return save_figure(fig, path)


def plot_stage_dynamics(moved: pd.DataFrame, path: Path) -> Path | None:
    """Per measure, a line per (arm, stage end): each layer's distance from the pretrained
    encoder; dashed after an intermediate stage, solid after the target (the legend names the
    arms only: the stages each arm ran are in the section's text)."""
    if moved.empty:
        return None
    fig, axes = subplots(1, len(MEASURES), figsize=(5.2 * len(MEASURES), 3.8), squeeze=False)
    arms = list(dict.fromkeys(moved.arm))
    colors, markers = arm_colors(arms), arm_markers(arms)
    titles = {"l2_sum": "weight L2 distance from pretrained, per block",
              "cka": "CKA with pretrained hidden states (1 = same), per state"}  # fmt: skip
    for ax, measure in zip(axes[0], MEASURES, strict=True):
        part = moved[moved.measure == measure]
        for (arm, stage), rows in part.groupby(["arm", "stage"], sort=False):
            style = "-" if stage == TARGET else "--"
            ax.plot(rows.layer, rows.value, style, marker=markers[arm], ms=3, color=colors[arm],
                    label=arm if stage == TARGET else None)  # fmt: skip
        ax.set_title(titles[measure], fontsize=9)
        ax.set_xlabel("block" if measure == "l2_sum" else "hidden state (0 = embeddings)")
        ax.grid(alpha=0.3)
    arm_legend(list(axes[0]))
    fig.suptitle("Confirm phase: how far each layer moved by the end of each stage (mean over "
                 "seeds)\ncolour = arm; dashed = after its intermediate stage, solid = after the "
                 "target", fontsize=10)  # fmt: skip
    return save_figure(fig, path)


def _figures(tables: Tables, folder: Path) -> dict[str, Path]:
    if CURVES not in tables:
        return {}
    drawn = {
        CURVES: plot_stage_curves(tables[CURVES], folder / f"{CURVES}.png"),
        MOVED: plot_stage_dynamics(tables[MOVED], folder / f"{MOVED}.png"),
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
        CURVES: "Confirm phase: dev-F1 learning curve of each stage (each on its own task).",
        MOVED: "Confirm phase: how far each layer had moved from the pretrained encoder when "
        "each stage ended.",
    },
)
