"""The per-evaluation side of a study read back from MLflow: each trial's metric at every
evaluation, as the evaluation made it (`learning_curves`, `evaluations_as_made`), the end-of-
trial layer dynamics, raw metric histories for bench/, and `final_gain` computed again from
the recorded curve for a study recorded before the driver tagged its rule
(`curve_final_gains`). Apart from `study.tracking.reading`, which reads the study record and
its trial table, because these read one history per trial and per metric.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd
from mlflow.tracking import MlflowClient

from study.names import CONFIRM, FINAL_GAIN_RULE_TAG
from trainables.settings import INTERMEDIATE_STEPS
from trainables.training.curves import final_gain

if TYPE_CHECKING:
    from study.tracking.reading import StudyRecord

# `final_gain_rule` of a trial whose final_gain the report computed again from its curve
RECOMPUTED = "recomputed"


def curve_final_gains(
    client: MlflowClient, trials: pd.DataFrame, plan: dict[str, Any]
) -> pd.DataFrame:
    """`final_gain` of each completed trial recorded before the driver tagged its rule
    (`final_gain_rule`), computed again with `trainables.training.curves.final_gain` from the
    history of its study metric as MLflow holds it (one value per evaluation, by step), so
    that a study recorded under the earlier rule (the best of the last third against the
    best before it) is judged from the smoothed curve like a new one; such rows get
    `final_gain_rule` "recomputed". A trial that kept its best evaluation (`best_step`,
    `until_plateau`) logged the kept weights' score again at its last step, over that
    evaluation's own value, which `evaluations_as_made` works out or leaves out. A
    trial with the tag, without a reported `final_gain`, or whose history holds fewer than
    2 evaluations of the metric (one reported only at the end) keeps its reported value."""
    if "final_gain" not in trials or "run_id" not in trials:
        return trials
    out = trials.copy()
    out["final_gain"] = pd.to_numeric(out["final_gain"])
    tagged = out.get(FINAL_GAIN_RULE_TAG, pd.Series(None, index=out.index, dtype=object))
    out[FINAL_GAIN_RULE_TAG] = tagged.where(tagged.notna(), None)
    declared = plan.get("metric") if isinstance(plan.get("metric"), dict) else {}
    status = out["status"] if "status" in out else pd.Series("completed", index=out.index)
    best_steps = pd.to_numeric(out["best_step"]) if "best_step" in out else None
    old = (status == "completed") & out["final_gain"].notna() & tagged.isna()
    for index in out.index[old]:
        own = out.at[index, "metric"] if "metric" in out else None
        metric = own if isinstance(own, dict) else declared
        name, mode = metric.get("name", "dev_f1"), metric.get("mode", "max")
        points = sorted(client.get_metric_history(out.at[index, "run_id"], name),
                        key=lambda m: (m.step, m.timestamp))  # fmt: skip
        by_step = {int(m.step): float(m.value) for m in points}  # a step logged again: last
        best = best_steps.at[index] if best_steps is not None else None
        area = out.at[index, "curve_area"] if "curve_area" in out else None
        made = evaluations_as_made(sorted(by_step.items()), name, _number(best), _number(area))
        values = [value for _, value in made]  # as `learning_curves` draws them
        gain = final_gain(values, mode)
        if not math.isnan(gain):
            out.at[index, "final_gain"] = gain
            out.at[index, FINAL_GAIN_RULE_TAG] = RECOMPUTED
    return out


def metric_histories(tracking_uri: str, run_id: str, *keys: str) -> list[dict[int, float]]:
    """Each metric's value at each logged step (the trial's optimizer step, or the layer).
    A client per call is cheap: MLflow keeps one store per URI."""
    client = MlflowClient(tracking_uri)
    return [{m.step: m.value for m in client.get_metric_history(run_id, k)} for k in keys]


def learning_curves(
    record: StudyRecord, phase: str = CONFIRM, metric: str | None = None
) -> pd.DataFrame:
    """A metric (the study's own by default) at every evaluation of every completed trial of a
    phase, as the evaluation made it: arm, seed, step (the target's own, after any
    intermediate stages), evaluation (index), the metric (a column of its name), run_id.
    Seeds of one arm are aligned by evaluation index.

    A trial under `until_plateau` (it reports `best_step`: the step of the weights it kept,
    its best evaluation on the smoothed curve) logs, at its last step, the kept weights' dev
    scores again in place of the last evaluation's own (trainables/training/train.py,
    `_final_metrics`): that value is the kept checkpoint's (the trial's final value, at
    `best_step`), not an evaluation, and is not put on the curve (`evaluations_as_made`)."""
    name = metric or record.study_metric[0]
    client = MlflowClient(record.tracking_uri)
    rows = []
    done = record.trials[(record.trials.phase == phase) & (record.trials.status == "completed")]
    for trial in done.itertuples():
        history = sorted(client.get_metric_history(trial.run_id, name), key=lambda m: m.step)
        before = getattr(trial, INTERMEDIATE_STEPS, 0.0)  # NaN for a trial without stages
        before = int(before) if before == before else 0
        points = evaluations_as_made(
            [(int(p.step), float(p.value)) for p in history], name,
            _number(getattr(trial, "best_step", None)), _number(getattr(trial, "curve_area", None)),
        )  # fmt: skip
        for index, (step, value) in enumerate(points):
            rows.append((trial.arm, trial.seed, step - before, index, value, trial.run_id))
    return pd.DataFrame(rows, columns=["arm", "seed", "step", "evaluation", name, "run_id"])


def evaluations_as_made(
    points: list[tuple[int, float]], name: str, best_step: float | None, curve_area: float | None
) -> list[tuple[int, float]]:
    """A metric's (step, value) history, by step, as the evaluations made it. A trial that kept
    an earlier evaluation's weights (`best_step`) logged their re-score at its last step: for
    `dev_f1` the last evaluation's own value is worked out from `curve_area` (the mean dev F1
    over the evaluations as made; `_as_evaluated`); for another metric, or without it, the
    last point is left out, unless the last evaluation was the kept one (its own value)."""
    if best_step is None or not points:
        return points
    if name == "dev_f1":
        values = _as_evaluated([v for _, v in points], curve_area)
        return [(step, v) for (step, _), v in zip(points, values, strict=False)]
    return points if points[-1][0] == int(best_step) else points[:-1]


def _number(value: Any) -> float | None:
    """A metric of a trial row as a float; None where the trial did not log it (NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _as_evaluated(logged: list[float], curve_area: float | None) -> list[float]:
    """The dev F1 of each evaluation as made, from a history whose last value is the kept
    checkpoint's re-score: the last evaluation's own value is n x curve_area less the others
    (exact to float rounding); without it, the history less its last value."""
    earlier = logged[:-1]
    if curve_area is None:
        return earlier
    last = len(logged) * curve_area - sum(earlier)
    return [*earlier, min(1.0, max(0.0, last))] if -1e-9 <= last <= 1 + 1e-9 else earlier


def layer_dynamics(record: StudyRecord) -> pd.DataFrame:
    """The end-of-trial layer dynamics of completed confirm trials: arm, seed, metric, layer,
    value (the metric names without their `dyn_` prefix)."""
    client = MlflowClient(record.tracking_uri)
    rows = []
    for trial in record.confirm_completed().itertuples():
        for name in record.dynamics:
            for point in client.get_metric_history(trial.run_id, name):
                rows.append((trial.arm, trial.seed, name[4:], int(point.step), float(point.value)))
    return pd.DataFrame(rows, columns=["arm", "seed", "metric", "layer", "value"])
