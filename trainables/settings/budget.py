"""How long a trial trains, when `epochs` (and `max_steps`) are not the right unit: the trial
setting `budget`, checked here without torch, so that the trial command line, an intermediate
stage and a study file refuse the same values with the same words.

    budget: {steps: 600}
        exactly 600 optimizer steps whatever the data fraction: the data cycles through as
        many epochs as that takes, the learning-rate schedule spans the 600 steps, and dev is
        evaluated as without a budget (every `eval_every` steps, else at each epoch's end).
        Arms on different data fractions then get the same compute.
    budget: {until_plateau: {patience: 2, min_delta: 0.005, max_epochs: 12}}
        train until the study metric on dev, averaged over the evaluations of the last epoch,
        has not improved by more than `min_delta` for `patience` evaluations in a row, or
        `max_epochs` are done; then the weights at the end of the best-averaged epoch are put
        back, and the final dev, test and extra-set scores are theirs. The average, not single
        evaluations: one noisy dev score must not decide where a trial stops. The
        learning-rate schedule spans `max_epochs`, so stopping early does not change the steps
        before it.
    no budget (null): `epochs`, capped by `max_steps`, as before budgets existed.

`max_steps` still caps every budget (it is what smoke runs set). `patience` counts dev
evaluations: without `eval_every` there is one per epoch, so it may not exceed `max_epochs`
(here); with `eval_every` it may not exceed the evaluations `max_epochs` hold, which depend on
the data and are checked when the trial is built (trainables/training/train.py).
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any

from trainables.errors import SettingError

BUDGET = "budget"  # the trial setting, study factor and stage key
# a final result's metric: 1 when `until_plateau`'s patience ended the trial before its last
# step, so that by the rule the study declared it had stopped improving
PLATEAU_STOPPED = "plateau_stopped"
# The keys of a budget and of `until_plateau`, with what each takes and is for
# (docs/study-keys.md).
KINDS = {
    "steps": "an integer >= 1: exactly this many optimizer steps at any data fraction (the "
    "data cycles, the lr schedule spans them)",
    "until_plateau": "`{patience, min_delta, max_epochs}`: train until the study metric on "
    "dev stops improving, then restore the best evaluation's weights",
}
PLATEAU_KEYS = {
    "patience": "an integer >= 1: dev evaluations in a row in which the metric averaged over "
    "the last epoch's evaluations gains no more than min_delta, before stopping",
    "min_delta": "a number >= 0 in the study metric's units (default 0): the least gain that "
    "counts",
    "max_epochs": "an integer >= 1: the most epochs, over which the lr schedule spans",
}
EXAMPLE = "{steps: 600} or {until_plateau: {patience: 2, min_delta: 0.005, max_epochs: 12}}"


class BudgetError(SettingError):
    """A budget that cannot run; `path` is where inside the setting (`until_plateau`,
    `patience`) and `reason` what is wrong there, so a study file's error names the line."""

    setting = BUDGET


@dataclass(frozen=True)
class Plateau:
    """`until_plateau`: stop after `patience` evaluations without a gain above `min_delta`."""

    patience: int
    max_epochs: int
    min_delta: float = 0.0


@dataclass(frozen=True)
class Budget:
    """One checked budget: exactly one of `steps` and `until_plateau`."""

    steps: int | None = None
    until_plateau: Plateau | None = None


def parse_budget(value: Any, eval_every: int | None = None) -> Budget | None:
    """The budget `value` asks for (None: none), checked; `eval_every` is the trial's: without
    it dev is evaluated once per epoch, so `patience` may not exceed `max_epochs`."""
    budget = budget_shape(value)
    plateau = budget.until_plateau if budget is not None else None
    if plateau is not None and eval_every is None and plateau.patience > plateau.max_epochs:
        raise BudgetError(("until_plateau", "patience"), f"{plateau.patience} is not allowed: "
                          "dev is evaluated once per epoch, so patience may be at most "
                          f"max_epochs ({plateau.max_epochs}); it would never stop "
                          "early")  # fmt: skip
    return budget


def budget_shape(value: Any) -> Budget | None:
    """`value` checked on its own, before the trial's `eval_every` is known (a study file's
    factor value; the arm as a whole is checked with `parse_budget`)."""
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) != 1:
        raise BudgetError((), f"{value!r} is not allowed: one of {EXAMPLE}")
    (kind, setting), = value.items()  # fmt: skip
    _known(kind, tuple(KINDS), (), "budget kind")
    if kind == "steps":
        return Budget(steps=_positive_int(setting, ("steps",)))
    return Budget(until_plateau=_plateau(setting))


def _plateau(value: Any) -> Plateau:
    path = ("until_plateau",)
    if not isinstance(value, dict):
        raise BudgetError(path, f"{value!r} is not allowed: a mapping such as "
                          "{patience: 2, min_delta: 0.005, max_epochs: 12}")  # fmt: skip
    for key in value:
        _known(key, tuple(PLATEAU_KEYS), path, "until_plateau key")
    for key in ("patience", "max_epochs"):
        if key not in value:
            raise BudgetError((*path, key), f"{key} is missing: until_plateau needs patience "
                              "and max_epochs (min_delta defaults to 0)")  # fmt: skip
    patience = _positive_int(value["patience"], (*path, "patience"))
    max_epochs = _positive_int(value["max_epochs"], (*path, "max_epochs"))
    delta = value.get("min_delta", 0.0)
    if not _number(delta) or delta < 0:
        raise BudgetError((*path, "min_delta"), f"{delta!r} is not allowed: a number >= 0 in "
                          "the study metric's units")  # fmt: skip
    return Plateau(patience, max_epochs, float(delta))


def _known(key: Any, known: tuple[str, ...], path: tuple[str, ...], what: str) -> None:
    if key in known:
        return
    close = difflib.get_close_matches(str(key), known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise BudgetError((*path, str(key)), f"unknown {what} {key!r}{hint}; {what}s: "
                      f"{', '.join(known)}")  # fmt: skip


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive_int(value: Any, path: tuple[str, ...]) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BudgetError(path, f"{value!r} is not allowed: an integer >= 1")
    return value


def check_patience(plateau: Plateau, evaluations: int) -> None:
    """With `eval_every`, patience may not exceed the dev evaluations `max_epochs` hold."""
    if plateau.patience > evaluations:
        raise BudgetError(("until_plateau", "patience"), f"{plateau.patience} is not allowed: "
                          f"max_epochs ({plateau.max_epochs}) hold only {evaluations} dev "
                          "evaluation(s) at this eval_every and data size")  # fmt: skip


def evaluations_per_epoch(batches_per_epoch: int, eval_every: int | None) -> int:
    """How many dev evaluations one epoch holds (at least 1): the smoothing window of
    `PlateauWatch`, so that its average always spans at least an epoch of training."""
    if not eval_every:
        return 1
    return max(1, math.ceil(batches_per_epoch / eval_every))


class PlateauWatch:
    """The stopping rule of `until_plateau` on one metric, judged on a smoothed curve, and the
    state a checkpoint keeps.

    Each evaluation is averaged with those before it over `window` evaluations (one epoch's
    worth, `evaluations_per_epoch`), and the rule watches that average: a trial stops after
    `patience` evaluations in which the average did not beat its best by more than
    `min_delta`. Judged on single evaluations, the rule stopped where one noisy dev score
    happened to dip, and that stopping point, not the arm, decided most of the seed-to-seed
    spread of a study's results (docs/history.md). No stop comes before the first full window,
    so every trial trains at least one epoch and `patience` evaluations beyond it. The weights
    kept are those at the end of the best window."""

    def __init__(self, plateau: Plateau, mode: str, window: int = 1):
        self.plateau, self.sign = plateau, 1.0 if mode == "max" else -1.0
        self.window = max(1, int(window))
        self.recent: list[float] = []  # the last `window` evaluations, oldest first
        self.best: float | None = None  # the best smoothed value
        self.best_step = 0
        self.best_evaluation = 0
        self.waited = 0

    def smoothed(self) -> float | None:
        """The average of the last `window` evaluations; None before the first full window."""
        if len(self.recent) < self.window:
            return None
        return sum(self.recent) / len(self.recent)

    def update(self, value: float, step: int, evaluation: int) -> bool:
        """Take one evaluation; True if the smoothed curve is at a new best (the weights of
        this evaluation are to be kept). Before the first full window every evaluation is kept
        and none counts against patience."""
        self.recent = [*self.recent, float(value)][-self.window :]
        average = self.smoothed()
        if average is None:
            self.best_step, self.best_evaluation = step, evaluation
            return True
        better = self.best is None or self.sign * (average - self.best) > self.plateau.min_delta
        if better:
            self.best, self.best_step, self.best_evaluation, self.waited = (
                average, step, evaluation, 0
            )  # fmt: skip
        else:
            self.waited += 1
        return better

    @property
    def stop(self) -> bool:
        return self.best is not None and self.waited >= self.plateau.patience

    def state(self) -> list[float]:
        best = math.nan if self.best is None else self.best
        head = [best, float(self.best_step), float(self.best_evaluation), float(self.waited)]
        return [*head, float(self.window), *self.recent]

    def load(self, state: list[float]) -> None:
        best, step, evaluation, waited = state[:4]
        self.best = None if math.isnan(best) else float(best)
        self.best_step, self.best_evaluation, self.waited = int(step), int(evaluation), int(waited)
        if len(state) > 4:  # a checkpoint of the smoothed rule: its window and last values
            self.window, self.recent = int(state[4]), [float(v) for v in state[5:]]
