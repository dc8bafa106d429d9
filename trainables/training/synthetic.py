"""The synthetic trainable: a trial with the tagger's interface (`run`, `save`, `restore`,
`finished`, `last_metrics`, `checkpoint_bytes`) whose learning curve comes from the response
surface in `trainables.settings.surface`, with no model, no data and no torch.

    trial = SyntheticTrial(TrialConfig.from_dict({"trainable": "synthetic", "lr": 1e-4}))
    for metrics in trial.run():   # one dict per evaluation; the last has final=1
        trial.save(checkpoint_dir)

It exists to exercise the machinery around trials (search, pruning, tracking, node loss, the
scale benchmark) in seconds; what it reports is never a finding.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainables.errors import TrainingDiverged
from trainables.settings.budget import PlateauWatch, check_patience
from trainables.settings.config import TrialConfig
from trainables.settings.surface import Surface, surface_of
from trainables.training.curves import final_gain, learning_curve_area, steps_to_fraction_of_final

STATE_FILE = "synthetic_state.json"


class SyntheticTrial:
    """One trial on the surface; evaluates when the tagger would (`eval_every` steps, or each
    epoch) and sleeps `step_s` per step in between."""

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
        self.watch = PlateauWatch(plateau, config.metric_mode) if plateau else None
        self.stopped = False  # until_plateau ended it before its last step
        self.step = 0
        self.eval_steps: list[int] = []
        self.eval_f1: list[float] = []
        self.metric_history: list[float] = []  # the study metric at each evaluation
        self.best_metrics: dict[str, float] = {}  # until_plateau: the best evaluation's
        self.last_metrics: dict[str, float] = {}
        self.fingerprint = None  # no encoder: nothing to compare with other trials

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
                f"optimum; the synthetic surface diverges above {self.surface.diverge_above})"
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
        """Spend `step_s` per step up to `step`; an injected failure raises on its step."""
        fail = self.cfg.fail_at_step
        failing = fail is not None and self.step < fail <= step
        stop = fail if failing else step
        if self.surface.step_s:
            time.sleep(self.surface.step_s * (stop - self.step))
        if failing:
            raise RuntimeError(f"injected failure at step {fail} (fail_at_step)")
        self.step = step

    def _evaluate(self, step: int) -> dict[str, float]:
        surface, lr = self.surface, self.cfg.lr
        mean = surface.mean_f1(self.arm, lr, step)
        noisy = mean + surface.seed_effect(self.settings)
        noisy += surface.noise / 4 * surface.draw(self.settings, step)
        f1 = min(1.0, max(0.0, noisy))
        self.eval_steps.append(step)
        self.eval_f1.append(f1)
        return {
            "step": float(step),
            "epoch": step / self.per_epoch,
            "evaluation": float(len(self.eval_steps)),
            "lr": lr,
            "train_loss": 1.0 - mean,
            "dev_f1": f1,
            "dev_loss": 1.0 - f1,
        }

    def _final_metrics(self) -> dict[str, float]:
        """Test at the kept step: the last, or under until_plateau the best evaluation's."""
        surface, lr = self.surface, self.cfg.lr
        kept = self.watch.best_step if self.watch is not None else self.step
        truth = surface.mean_f1(self.arm, lr, kept)
        test = truth + surface.seed_effect(self.settings)
        test += surface.noise / 2 * surface.draw(self.settings, -1)
        reached = steps_to_fraction_of_final(self.eval_steps, self.eval_f1)
        out = {
            "final": 1.0,
            "test_f1": min(1.0, max(0.0, test)),
            "surface_f1": truth,
            "curve_area": learning_curve_area(self.eval_f1),
            "steps_to_95": float(reached) if reached is not None else math.nan,
            "steps_run": float(self.step),
            "tokens_seen": float(self.step * surface.tokens_per_step),
            "final_gain": final_gain(self.metric_history, self.cfg.metric_mode),
        }
        if self.watch is not None:
            out.update(self.best_metrics)
            out["best_step"] = float(self.watch.best_step)
            out["best_evaluation"] = float(self.watch.best_evaluation)
        return out

    # --- state ----------------------------------------------------------------------------
    def checkpoint_bytes(self) -> int:
        return 4096

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
