"""The convergence summaries of a dev-F1 learning curve, without seqeval or torch: the tagger
(through `trainables.training.metrics`) and the synthetic trainable report the same summaries."""

from __future__ import annotations

import math
from collections.abc import Sequence

# The name of `final_gain`'s rule, which the driver tags on each completed trial run
# (`final_gain_rule`): a trial without it reported the earlier rule (the best of the last
# third against the best before it), and the report computes it again from the curve.
FINAL_GAIN_RULE = "line_last_third"


def learning_curve_area(f1_history: Sequence[float]) -> float:
    """Mean dev F1 over evaluations: higher when a run gets good early, not only at the end."""
    if not f1_history:
        raise ValueError("learning-curve area needs at least one evaluation")
    return float(sum(f1_history) / len(f1_history))


def steps_to_fraction_of_final(
    steps: Sequence[int], f1_history: Sequence[float], fraction: float = 0.95
) -> int | None:
    """First step whose dev F1 reaches `fraction` of the final F1; None if final F1 is 0.

    Final, not best, F1 is the reference so that a run that peaks and degrades is not
    credited with fast convergence to a value it does not keep.
    """
    if len(steps) != len(f1_history) or not steps:
        raise ValueError("steps and F1 history must be non-empty and of equal length")
    final = f1_history[-1]
    if final <= 0:
        return None
    target = fraction * final
    return next(s for s, f in zip(steps, f1_history, strict=True) if f >= target)


def final_gain(history: Sequence[float], mode: str = "max") -> float:
    """How much the study metric still gained at the end of a run, read from the smoothed
    curve, for the convergence check (`study.analysis.Analysis.converged`): the rise of the
    least-squares line through the run's last third of evaluations (at least the last 2),
    from the window's first evaluation to its last, negated for a metric to minimise, so
    positive means the run was still improving either way. NaN with fewer than 2 evaluations
    (one point cannot tell whether a run stopped improving) or with an evaluation that
    measured nothing (NaN).

    Smoothed, because dev metrics are noisy: the best of a window, or its last minus its
    first, moves with single lucky or unlucky evaluations, while the line weighs every point
    of the window and follows a trend that is still there. With noise sd s per evaluation its
    rise over k points has sd s * sqrt(12 (k - 1) / (k (k + 1))): sqrt(2) s, as last minus
    first, for k = 2 or 3 (the middle of 3 evenly spaced points has no weight), 1.34 s at 4,
    0.99 s at 10, 0.61 s at 30: the smoothing grows with the run, and a short run is judged
    as noisily as its few evaluations allow. The window stays the last third, not more, so
    that a short run's early climb is not read as a late one. A line, not a moving average,
    because evaluations are evenly spaced in steps (every `eval_every` steps or every epoch,
    the last one possibly sooner, at the run's end; the index stands in for the step) and a
    line needs no window length in evaluations per epoch, which the curve alone does not
    know. The curve is the one actually trained (an `until_plateau` run's evaluations after
    its best included), not the kept weights'; what stopped the run plays no part."""
    n = len(history)
    if n < 2 or any(math.isnan(value) for value in history):
        return float("nan")
    tail = [float(v) for v in history[n - max(2, math.ceil(n / 3)) :]]
    rise = line_slope(tail) * (len(tail) - 1)
    return rise if mode == "max" else -rise


def line_slope(values: Sequence[float]) -> float:
    """The slope per evaluation of the least-squares line through evenly spaced `values`
    (at least 2): sum((x - mean x) (y - mean y)) / sum((x - mean x)^2), x = 0, 1, ..."""
    k = len(values)
    if k < 2:
        raise ValueError("a line needs at least 2 points")
    x_mean, y_mean = (k - 1) / 2, sum(values) / k
    spread = sum((x - x_mean) ** 2 for x in range(k))
    return sum((x - x_mean) * (y - y_mean) for x, y in enumerate(values)) / spread
