"""The convergence summaries of a dev-F1 learning curve, without seqeval or torch: the tagger
(through `trainables.training.metrics`) and the synthetic trainable report the same summaries."""

from __future__ import annotations

import math
from collections.abc import Sequence


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
    """How much the study metric still gained at the end of a run, for the convergence check
    (`study.analysis.Analysis.converged`): the best value over the run's last third of
    evaluations (at least the last 2, at most all but the first) minus the best before it,
    negated for a metric to minimise, so positive means a new best came late either way.
    NaN with fewer than 2 evaluations (one point cannot tell whether a run stopped
    improving) or with an evaluation that measured nothing (NaN).

    Best against best, not last against first of the window: dev metrics are noisy, and a
    dip at the window's start followed by a recovery (no new best) read as still improving,
    even in runs that `until_plateau` had stopped. The curve is the one actually trained (an
    `until_plateau` run's evaluations after its best included), not the kept weights'."""
    n = len(history)
    if n < 2 or any(math.isnan(value) for value in history):
        return float("nan")
    start = max(1, n - max(2, math.ceil(n / 3)))
    best = max if mode == "max" else min
    gain = float(best(history[start:]) - best(history[:start]))
    return gain if mode == "max" else -gain
