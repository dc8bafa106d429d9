"""The synthetic trainable: a trial with the tagger's interface (`run`, `save`, `restore`,
`finished`, `last_metrics`, `checkpoint_bytes`) whose learning curve comes from the response
surface in `trainables.settings.surface`, with no model, no data and no torch.

    trial = SyntheticTrial(TrialConfig.from_dict({"trainable": "synthetic", "lr": 1e-4}))
    for metrics in trial.run():   # one dict per evaluation; the last has final=1
        trial.save(checkpoint_dir)

It exists to exercise the machinery around trials (search, pruning, tracking, node loss, the
scale benchmark) in seconds; what it reports is never a finding. With the surface option
`fingerprint` its final checkpoint also holds a stand-in layer fingerprint
(`stand_in_fingerprint`), so the fingerprint's way to MLflow is tested without an encoder.
"""

from __future__ import annotations

import json
import math
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from trainables.errors import TrainingDiverged
from trainables.measures.fingerprints import LayerFingerprint, sentences_within
from trainables.measures.fingerprints.record import kept_counts
from trainables.settings.budget import (
    PLATEAU_STOPPED,
    PlateauWatch,
    check_patience,
    evaluations_per_epoch,
)
from trainables.settings.config import SURFACE_DRAWS, TrialConfig
from trainables.settings.reported import each_time_test_name
from trainables.settings.sizes import parse_size
from trainables.settings.surface import SYNTHETIC, Surface, surface_of
from trainables.training.curves import final_gain, learning_curve_area, steps_to_fraction_of_final

STATE_FILE = "synthetic_state.json"
_SALT = 20261124  # keeps the surface's draws apart from any other use of the same seeds
_EVALUATION = 1  # marks an evaluation's (or the test set's) draw in its seed key
_FINGERPRINT = 2  # marks the stand-in fingerprint's draws in its seed key
# The stand-in fingerprint's shape: every trial's is taken on the same "sentences" (these
# lengths, token ids 0..T-1), so the report can compare any two, as it does the tagger's.
STAND_IN_BLOCKS, STAND_IN_HEADS, STAND_IN_FEATURES = 2, 2, 8
STAND_IN_LENGTHS = (3, 5, 4, 6)


class SyntheticTrial:
    """One trial on the surface; evaluates when the tagger would (`eval_every` steps, or each
    epoch) and sleeps `step_s` per step in between (while the `step_s_while` file exists)."""

    def __init__(self, config: TrialConfig):
        surface = surface_of(config.trainable)
        if surface is None:
            raise ValueError("SyntheticTrial needs a config with trainable: synthetic")
        self.cfg = config
        self.surface: Surface = surface
        self.settings: dict[str, Any] = config.to_dict()
        self.arm = surface.arm(self.settings)
        budget = config.parsed_budget()
        self.per_epoch, self.total_steps = surface.trial_steps(
            self.arm, config.epochs, config.max_steps, budget
        )
        plateau = budget.until_plateau if budget is not None else None
        if plateau is not None and config.eval_every:
            check_patience(plateau, math.ceil(self.total_steps / config.eval_every))
        window = evaluations_per_epoch(self.per_epoch, config.eval_every)
        self.watch = PlateauWatch(plateau, config.metric_mode, window) if plateau else None
        self.stopped = False  # until_plateau ended it before its last step
        self.step = 0
        self.eval_steps: list[int] = []
        self.eval_f1: list[float] = []
        self.metric_history: list[float] = []  # the study metric at each evaluation
        self.best_metrics: dict[str, float] = {}  # until_plateau: the best evaluation's
        self.last_metrics: dict[str, float] = {}
        # no encoder: only the surface option `fingerprint` keeps one, a stand-in, at the end
        self.fingerprint: LayerFingerprint | None = None

    @property
    def finished(self) -> bool:
        return self.step >= self.total_steps or self.stopped

    def evaluation_steps(self) -> list[int]:
        """The steps a dev evaluation follows, the last step always among them."""
        every = self.cfg.eval_every or self.per_epoch
        steps = list(range(every, self.total_steps, every))
        return [*steps, self.total_steps]

    def run(self) -> Iterator[dict[str, float]]:
        lr = self.cfg.lr
        if self.step == 0 and self.surface.diverges(self.arm, lr):
            off = self.surface.decades_off(self.arm, lr)
            raise TrainingDiverged(
                f"loss became nan at step 1 (lr={lr:.3g}, {off:.2f} decades above this arm's "
                f"optimum; the synthetic surface diverges above {self.surface.diverge_above}); "
                f"{TrainingDiverged.INVALID}"
            )
        for step in (s for s in self.evaluation_steps() if s > self.step):
            if self.stopped:
                return
            self._advance_to(step)
            metrics = self._evaluate(step)
            if self._plateau_reached(metrics) or step == self.total_steps:
                metrics.update(self._final_metrics())
            self.last_metrics = metrics
            yield metrics

    def _plateau_reached(self, metrics: dict[str, float]) -> bool:
        """`until_plateau` as the tagger runs it: the best evaluation is kept (here its
        metrics; the final result reports them), patience running out ends the trial."""
        self.metric_history.append(float(metrics.get(self.cfg.metric_name, math.nan)))
        if self.watch is None:
            return False
        if self.watch.update(self.metric_history[-1], self.step, len(self.eval_steps)):
            self.best_metrics = {k: metrics[k] for k in ("dev_f1", "dev_loss")}
        self.stopped = self.watch.stop
        return self.stopped

    def _advance_to(self, step: int) -> None:
        """Spend `step_s` per step up to `step` (`Surface.seconds_per_step`); an injected
        failure raises on its step."""
        fail = self.cfg.fail_at_step
        failing = fail is not None and self.step < fail <= step
        stop = fail if failing else step
        if seconds := self.surface.seconds_per_step():
            time.sleep(seconds * (stop - self.step))
        if failing:
            raise RuntimeError(f"injected failure at step {fail} (fail_at_step)")
        self.step = step

    def _evaluate(self, step: int) -> dict[str, float]:
        surface, lr = self.surface, self.cfg.lr
        mean = surface.mean_f1(self.arm, lr, step)
        noisy = mean + seed_effect(surface, self.settings)
        noisy += surface.noise / 4 * draw(self.settings, step)
        f1 = min(1.0, max(0.0, noisy))
        self.eval_steps.append(step)
        self.eval_f1.append(f1)
        out = {
            "step": float(step),
            "epoch": step / self.per_epoch,
            "evaluation": float(len(self.eval_steps)),
            "lr": lr,
            "train_loss": 1.0 - mean,
            "dev_f1": f1,
            "dev_loss": 1.0 - f1,
        }
        if self.cfg.eval_test_each_time:  # what test_f1 would be, were this step kept
            test = self._test_f1(step)
            out.update({each_time_test_name("test_f1"): test,
                        each_time_test_name("test_loss"): 1.0 - test})  # fmt: skip
        return out

    def _test_f1(self, step: int) -> float:
        """Test F1 of the weights at `step`: F there, the trial's seed effect and its one test
        draw (so scored at the kept step it is the final `test_f1`, as the tagger's is)."""
        surface = self.surface
        test = surface.mean_f1(self.arm, self.cfg.lr, step) + seed_effect(surface, self.settings)
        test += surface.noise / 2 * draw(self.settings, -1)
        return min(1.0, max(0.0, test))

    def _final_metrics(self) -> dict[str, float]:
        """Test at the kept step: the last, or under until_plateau the best evaluation's."""
        surface, lr = self.surface, self.cfg.lr
        kept = self.watch.best_step if self.watch is not None else self.step
        truth = surface.mean_f1(self.arm, lr, kept)
        reached = steps_to_fraction_of_final(self.eval_steps, self.eval_f1)
        out = {
            "final": 1.0,
            "test_f1": self._test_f1(kept),
            "surface_f1": truth,
            "curve_area": learning_curve_area(self.eval_f1),
            "steps_to_95": float(reached) if reached is not None else math.nan,
            "steps_run": float(self.step),
            "tokens_seen": float(self.step * surface.tokens_per_step),
            "final_gain": final_gain(self.metric_history, self.cfg.metric_mode),
            PLATEAU_STOPPED: float(self.stopped),
        }
        if self.watch is not None:
            out.update(self.best_metrics)
            out["best_step"] = float(self.watch.best_step)
            out["best_evaluation"] = float(self.watch.best_evaluation)
        cfg = self.cfg
        if self.surface.fingerprint and cfg.keeps_fingerprint:
            cap = cfg.fingerprint_max_bytes
            kept = stand_in_fingerprint(self.settings, None if cap is None else parse_size(cap))
            self.fingerprint = kept
            out.update(kept_counts(kept))  # what the tagger reports of its own, without the time
        return out

    # --- state ----------------------------------------------------------------------------
    def checkpoint_bytes(self) -> int:
        return 4096

    def save_model(self, folder: str | Path) -> None:
        """No model: a response surface has no weights to keep."""

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {
            "step": self.step,
            "eval_steps": self.eval_steps,
            "eval_f1": self.eval_f1,
            "metric_history": self.metric_history,
            "plateau": self.watch.state() if self.watch is not None else [],
            "best_metrics": self.best_metrics,
            "stopped": self.stopped,
            "last_metrics": self.last_metrics,
        }
        (directory / STATE_FILE).write_text(json.dumps(state))

    def restore(self, directory: str | Path) -> None:
        state = json.loads((Path(directory) / STATE_FILE).read_text())
        self.step = int(state["step"])
        self.eval_steps = [int(s) for s in state["eval_steps"]]
        self.eval_f1 = [float(f) for f in state["eval_f1"]]
        self.last_metrics = dict(state["last_metrics"])
        self.metric_history = [float(v) for v in state.get("metric_history", [])]
        self.best_metrics = dict(state.get("best_metrics", {}))
        self.stopped = bool(state.get("stopped", False))
        if self.watch is not None and state.get("plateau"):
            self.watch.load([float(v) for v in state["plateau"]])


# --- the surface's draws (trainables/settings/surface.py says what they add up to) -----------
def _seeds(settings: dict[str, Any]) -> tuple[int, int]:
    """The trial's seed and its data seed (the seed where it sets none), as the tagger's."""
    seed = int(settings.get("seed", 0))
    data_seed = settings.get("data_seed")
    return seed, seed if data_seed is None else int(data_seed)


def seed_effect(surface: Surface, settings: dict[str, Any]) -> float:
    """noise * (a + b) / sqrt(2): a shared by every arm on this seed, b this trial's own."""
    seed, data_seed = _seeds(settings)
    shared = np.random.default_rng([_SALT, seed, data_seed]).standard_normal()
    own = np.random.default_rng([_SALT, trial_hash(settings), seed]).standard_normal()
    return surface.noise * float(shared + own) / math.sqrt(2)


def draw(settings: dict[str, Any], *where: int) -> float:
    """A standard normal draw of this trial at `where` (a step, or -1 for the test set).

    numpy seeds [x, y] and [x, y, 0] alike (trailing zeros add no entropy), so the key
    marks these draws apart from `seed_effect`'s and never ends in a zero."""
    seed = int(settings.get("seed", 0))
    key = [_SALT, trial_hash(settings), seed, _EVALUATION, *(w + 2 for w in where)]
    return float(np.random.default_rng(key).standard_normal())


def stand_in_fingerprint(
    settings: dict[str, Any], max_bytes: int | None = None
) -> LayerFingerprint | None:
    """A layer fingerprint in the tagger's format with no encoder behind it: hidden states
    of normal draws and attention rows of uniform draws (each row summing to 1), from a
    generator seeded by the trial's seed, data seed and `trial_hash`, so a trial (resumed or
    not) always keeps the same one. Under `max_bytes` the last sentences are dropped as the
    tagger drops them; None when not one fits."""
    blocks, heads, features = STAND_IN_BLOCKS, STAND_IN_HEADS, STAND_IN_FEATURES
    kept = sentences_within(STAND_IN_LENGTHS, blocks, heads, features, max_bytes)
    if kept == 0:
        return None
    seed, data_seed = _seeds(settings)
    # + 1: numpy seeds [x, y] and [x, y, 0] alike, so the key never ends in a zero
    rng = np.random.default_rng([_SALT, trial_hash(settings), seed, _FINGERPRINT, data_seed + 1])
    tokens = sum(STAND_IN_LENGTHS)
    hidden = [rng.standard_normal((tokens, features)) for _ in range(blocks + 1)]
    attention = []
    for _ in range(blocks):
        rows = [rng.random((heads, n, n)) for n in STAND_IN_LENGTHS]
        attention.append([(r / r.sum(-1, keepdims=True)).reshape(heads, -1) for r in rows])
    lengths = STAND_IN_LENGTHS[:kept]  # the same draws, whatever the cap keeps of them
    used = sum(lengths)
    return LayerFingerprint.from_arrays(
        [h[:used] for h in hidden],
        [np.concatenate(maps[:kept], axis=1) for maps in attention],
        lengths,
        np.arange(used),
        {"model": SYNTHETIC, "sample_sentences": str(len(STAND_IN_LENGTHS))},
    )


def trial_hash(settings: dict[str, Any]) -> int:
    """A stable number for the settings that make a trial's own draws (not its seed): the
    `TrialConfig` fields marked `draws` (trainables/settings/config.py)."""
    text = json.dumps({k: settings.get(k) for k in SURFACE_DRAWS}, sort_keys=True, default=str)
    return zlib.crc32(text.encode())
