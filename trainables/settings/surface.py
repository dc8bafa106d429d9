"""The synthetic trainable's response surface: learning curves from a documented formula, for
testing the machinery (search, pruning, tracking, a cluster losing a node, the scale
benchmark). Never a finding: every report of a synthetic study says so in its title.

A trial's settings that the surface reads (everything else is ignored), with `L` = `layers`:

- `d`, the blocks kept: `depth` (an int, `full` = L, `full-N` = L - N; none = L);
- `r`, the blocks re-initialised: `d - reinit_from` when `reinit_from` < d, else 0;
- `h`, the heads re-initialised: `len(reinit_heads)`; `f` = `data_fraction`; `lr`; `seed`
  and `data_seed`; `epochs`, `max_steps` and `eval_every` as the tagger reads them.

The arm's learning-rate optimum, in decades above `best_lr` (fewer blocks, fresh blocks and
less data each want a larger rate):

    shift = 0.5 (L - d) / L + 1.0 r / d + 0.25 log10(1 / f)        lr* = best_lr * 10**shift

What the arm converges to at its optimum, and at a learning rate `x` decades from it:

    top = peak_f1 - 0.10 (L - d) / L - 0.15 r / d - 0.2 h / (L * heads) - 0.08 log10(1 / f)
    F_inf = max(0, top - lr_penalty * x**2)

How fast (in optimizer steps; one full-data epoch is `steps_per_epoch` steps, a trial's epoch
`ceil(steps_per_epoch * f)`): a shallower encoder converges sooner, re-initialised blocks
later, and a smaller learning rate later, by sqrt(10) per decade:

    tau = convergence_epochs * steps_per_epoch * sqrt(d / L) * (1 + r / d) * 10**(-x / 2)
    (times `slow_by` for the arm `slow_arm` names: an arm made to under-train on purpose)
    F(s) = F_inf * (1 - exp(-s / tau))

What a trial reports at step s: `dev_f1` = F(s) + noise * (a + b) / sqrt(2) + noise / 4 * e_s,
clipped to [0, 1], where a is drawn from the seed (and data seed) alone, so every arm shares
it and pairing by seed removes it, b from the seed and the arm's and sample's settings, and
e_s afresh at every evaluation; `dev_loss` = 1 - dev_f1. At the end also `test_f1` (F at the
last step plus the same a and b and its own noise / 2 draw), `surface_f1` (F at the last step
without noise: what the regret of a choice is measured on), `curve_area` and `steps_to_95`.
Under `eval_test_each_time` every evaluation also reports `eval_test_f1` (and
`eval_test_loss` = 1 - it): F at that step plus the same a, b and test draw, so at the kept
step it equals the final `test_f1`, as the tagger's does.
All draws come from numpy generators seeded by those values (trainables/training/synthetic.py;
b's settings are the `TrialConfig` fields marked `draws`), so a trial is the same every time
and a resumed trial reports what an uninterrupted one would.

A trial's steps follow its `budget` as the tagger's do (trainables/settings/budget.py): `steps`, or
`until_plateau` on the study metric, whose final `dev_f1`, `test_f1` and `surface_f1` are
then those of the best evaluation's step. `tokens_seen` is `tokens_per_step` per step (there
is no data: a nominal count, so compute comparisons have something to compare).

A trial more than `diverge_above` decades above its arm's optimum diverges at its first step
(`TrainingDiverged`, as the tagger's NaN loss does); `fail_at_step` raises as in the tagger.
Each step takes `step_s` seconds of wall time (sleeping; 0 for throughput runs), or, with
`step_s_while` naming a file (an absolute path), only while that file exists, as read before
each run of steps between evaluations: a test that needs a study still running when it
crashes a server or a node removes the file once it has, and the rest of the study runs at
once.

With `fingerprint: true` a trial that ends also keeps a stand-in layer fingerprint where the
trial's `dynamics` and `fingerprint` settings would keep the tagger's: a few random arrays in
the tagger's file format, drawn from the trial's seed and settings, that travel the same way
(final checkpoint, the driver's MLflow artifact, the report's layer comparisons). What those
comparisons show is noise; off by default, so a trial reports exactly what it did before.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainables.errors import ConfigError
from trainables.settings.budget import Budget, parse_budget
from trainables.settings.layouts import DepthError, blocks_kept
from trainables.yaml_reading import as_flag

TAGGER, SYNTHETIC = "tagger", "synthetic"


# --- the options: each one's default, what it is for and the values it takes, on its field ---
_HELP, _ALLOWED, _CHECK = "help", "allowed", "check"  # the traits a field's metadata holds


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _option(default: Any, help: str, allowed: str, check: Callable[[Any], bool]) -> Any:
    """One surface option described once: docs/study-keys.md (study/spec/reference.py through
    value_keys), the check of a study file's value and its error all read this field."""
    return field(default=default, metadata={_HELP: help, _ALLOWED: allowed, _CHECK: check})


_INT = ("an integer >= 1", _positive_int)  # what an integer-valued option takes


@dataclass(frozen=True)
class Surface:
    """The options of `trainable: {synthetic: {...}}`, each with its default, what it is for
    and what it takes on its field (`_option`)."""

    layers: int = _option(12, "blocks of the nominal encoder (depth `full`)", *_INT)
    heads: int = _option(12, "attention heads per block (reinit_heads indices)", *_INT)
    best_lr: float = _option(
        5.0e-5, "the optimum with every block, none re-initialised, all data",
        "a learning rate > 0", lambda v: _number(v) and v > 0,
    )  # fmt: skip
    peak_f1: float = _option(
        0.9, "what that optimum converges to", "an F1 in (0, 1]",
        lambda v: _number(v) and 0 < v <= 1,
    )  # fmt: skip
    lr_penalty: float = _option(
        0.1, "F1 lost per squared decade away from an arm's optimum", "a number >= 0",
        lambda v: _number(v) and v >= 0,
    )  # fmt: skip
    noise: float = _option(
        0.01, "seed-to-seed standard deviation of F1 (about one F1 point at 0.01)",
        "a standard deviation >= 0", lambda v: _number(v) and v >= 0,
    )  # fmt: skip
    convergence_epochs: float = _option(
        0.5, "epochs to 63% of the asymptote, at the optimum", "epochs > 0",
        lambda v: _number(v) and v > 0,
    )  # fmt: skip
    steps_per_epoch: int = _option(100, "optimizer steps per epoch on all the data", *_INT)
    step_s: float = _option(
        0.0, "wall seconds per step (sleeping)", "seconds >= 0", lambda v: _number(v) and v >= 0
    )
    step_s_while: str | None = _option(
        None, "steps take `step_s` only while this file exists on the machine a trial runs on "
        "(read before each run of steps between evaluations), and no time once it is gone "
        "(a test that needs a study running through some event lets the rest of it finish at "
        "once); null: always", "an absolute file path, or null",
        lambda v: v is None or (isinstance(v, str) and os.path.isabs(v)),
    )  # fmt: skip
    diverge_above: float | None = _option(
        1.5, "decades above the optimum that diverge; null: never", "decades > 0, or null",
        lambda v: v is None or (_number(v) and v > 0),
    )  # fmt: skip
    slow_arm: dict[str, Any] | None = _option(
        None, "the trials whose settings equal all of these (e.g. {reinit_from: 4}) learn "
        "`slow_by` times slower: a study can under-train one arm deterministically",
        "a mapping of trial settings to values, e.g. {reinit_from: 4}, or null",
        lambda v: v is None or (isinstance(v, dict) and all(isinstance(k, str) for k in v)),
    )  # fmt: skip
    slow_by: float = _option(
        10.0, "how many times slower `slow_arm` learns", "a factor >= 1",
        lambda v: _number(v) and v >= 1,
    )  # fmt: skip
    tokens_per_step: int = _option(512, "what one step adds to tokens_seen", *_INT)
    fingerprint: bool = _option(
        False, "keep a stand-in layer fingerprint (random arrays in the tagger's file format) "
        "where `dynamics` and `fingerprint` would keep the tagger's: tests its way to MLflow "
        "and the report", "true or false", lambda v: isinstance(v, bool),
    )  # fmt: skip

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> Surface:
        unknown = [name for name in options if name not in cls.option_names()]
        if unknown:
            raise ConfigError(
                f"unknown synthetic surface option(s) {', '.join(map(str, unknown))}; "
                f"options: {', '.join(cls.option_names())}"
            )
        flags = {f.name for f in dataclasses.fields(cls) if isinstance(f.default, bool)}
        # a yes/no/on/off word is a boolean here as in every other setting (yaml_reading)
        options = {name: as_flag(value) if name in flags else value
                   for name, value in options.items()}  # fmt: skip
        for name, value in options.items():
            check_option(name, value)
        return cls(**options)

    def options(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def seconds_per_step(self) -> float:
        """`step_s`, or 0 once the file `step_s_while` names is gone (read before each run of
        steps between two evaluations, so a file removed mid-run takes effect at the next)."""
        if self.step_s_while is not None and not os.path.exists(self.step_s_while):
            return 0.0
        return self.step_s

    # --- the formula ---------------------------------------------------------------------
    def arm(self, settings: dict[str, Any]) -> ArmPoint:
        """The structural part of a trial's settings, as the formula reads it."""
        layers = self.layers
        kept = _blocks_kept(settings.get("depth"), layers)
        start = settings.get("reinit_from")
        fresh = kept - start if start is not None and start < kept else 0
        heads = len(settings.get("reinit_heads") or [])
        fraction = float(settings.get("data_fraction", 1.0))
        slow = self.slow_arm is not None and all(
            settings.get(name) == value for name, value in self.slow_arm.items()
        )
        return ArmPoint(kept, fresh, heads, fraction, slow)

    def optimum_lr(self, arm: ArmPoint) -> float:
        shift = 0.5 * (self.layers - arm.kept) / self.layers + 1.0 * arm.fresh / arm.kept
        shift += 0.25 * math.log10(1.0 / arm.fraction)
        return self.best_lr * 10**shift

    def decades_off(self, arm: ArmPoint, lr: float) -> float:
        return math.log10(lr / self.optimum_lr(arm))

    def asymptote(self, arm: ArmPoint, lr: float) -> float:
        top = self.peak_f1 - 0.10 * (self.layers - arm.kept) / self.layers
        top -= 0.15 * arm.fresh / arm.kept + 0.2 * arm.heads / (self.layers * self.heads)
        top -= 0.08 * math.log10(1.0 / arm.fraction)
        return max(0.0, top - self.lr_penalty * self.decades_off(arm, lr) ** 2)

    def tau_steps(self, arm: ArmPoint, lr: float) -> float:
        tau = self.convergence_epochs * self.steps_per_epoch * math.sqrt(arm.kept / self.layers)
        tau *= (1 + arm.fresh / arm.kept) * (self.slow_by if arm.slow else 1.0)
        return tau * 10 ** (-self.decades_off(arm, lr) / 2)

    def mean_f1(self, arm: ArmPoint, lr: float, step: int) -> float:
        """F(step): the noise-free dev F1 of the arm at this learning rate."""
        return self.asymptote(arm, lr) * (1 - math.exp(-step / self.tau_steps(arm, lr)))

    def diverges(self, arm: ArmPoint, lr: float) -> bool:
        return self.diverge_above is not None and self.decades_off(arm, lr) > self.diverge_above

    def trial_steps(
        self, arm: ArmPoint, epochs: int, max_steps: int | None, budget: Budget | None = None
    ) -> tuple[int, int]:
        """Steps per epoch of a trial on its data fraction, and its steps at most, as the
        tagger counts them (trainables/training/optimization.py `step_budget`)."""
        per_epoch = max(1, math.ceil(self.steps_per_epoch * arm.fraction))
        total = epochs * per_epoch
        if budget is not None and budget.steps is not None:
            total = budget.steps
        elif budget is not None and budget.until_plateau is not None:
            total = budget.until_plateau.max_epochs * per_epoch
        return per_epoch, min(total, max_steps) if max_steps else total

    def best_final(
        self, settings: dict[str, Any], low: float, high: float, points: int = 2001
    ) -> tuple[float, float]:
        """(lr, F at the trial's last step) of the best learning rate in [low, high] on a
        log grid: the truth a search in that range is measured against (regret)."""
        import numpy as np  # here: importing the settings loads no numpy (the driver's start)

        arm = self.arm(settings)
        budget = parse_budget(settings.get("budget"), settings.get("eval_every"))
        epochs, max_steps = settings.get("epochs", 3), settings.get("max_steps")
        _, total = self.trial_steps(arm, epochs, max_steps, budget)
        grid = np.geomspace(low, high, points)
        values = [self.mean_f1(arm, lr, total) for lr in grid]
        best = int(np.argmax(values))
        return float(grid[best]), float(values[best])


@dataclass(frozen=True)
class ArmPoint:
    kept: int  # d
    fresh: int  # r
    heads: int  # h
    fraction: float  # f
    slow: bool = False  # the arm `slow_arm` names


def _blocks_kept(depth: Any, layers: int) -> int:
    try:
        return int(blocks_kept(depth, layers))
    except DepthError:
        allowed = "an int or full-N"
        raise ConfigError(f"trial setting depth={depth!r} is not allowed: {allowed}") from None


# --- checking options -------------------------------------------------------------------------
_OPTIONS = {item.name: item.metadata for item in dataclasses.fields(Surface)}
OPTION_HELP = {name: traits[_HELP] for name, traits in _OPTIONS.items()}


def option_allowed(name: str) -> str:
    """What option `name` takes, as its check says it."""
    return _OPTIONS[name][_ALLOWED]


def check_option(name: str, value: Any) -> None:
    allowed = _OPTIONS[name][_ALLOWED]
    if not _OPTIONS[name][_CHECK](value):
        raise ConfigError(f"synthetic surface option {name}={value!r} is not allowed: {allowed}")


def surface_of(trainable: Any) -> Surface | None:
    """The surface a `trainable` setting asks for, or None for the tagger. Takes `tagger`,
    `synthetic` or `{synthetic: {option: value}}`; anything else is a ConfigError."""
    if trainable in (None, TAGGER):
        return None
    if trainable == SYNTHETIC:
        return Surface()
    if isinstance(trainable, dict) and list(trainable) == [SYNTHETIC]:
        options = trainable[SYNTHETIC] or {}
        if isinstance(options, dict):
            return Surface.from_options(options)
    raise ConfigError(
        f"trial setting trainable={trainable!r} is not allowed: expected '{TAGGER}', "
        f"'{SYNTHETIC}' or {{{SYNTHETIC}: {{option: value}}}}"
    )
