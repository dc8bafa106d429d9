"""A trial with intermediate stages: each stage a whole `Trial` of its own, the encoder handed on.

    trial = new_trial(TrialConfig.from_dict(config))   # a StagedTrial (training/trials.py)
    for metrics in trial.run(): ...                     # same protocol as Trial

Stage i is exactly the trial `stage_config(config, i)` (its own data, label map, head,
optimizer, step budget, and seeds drawn from (seed, i) and (data seed, i)), started from the
encoder the previous stage ended with; the target is exactly the trial without `intermediate`,
started from the last stage's encoder. So running the stages by hand, copying the encoder
from one trial to the next, gives the same weights bit for bit on CPU, and:

- Layer surgery (depth, re-initialisation) happens once, when the target is built, before the
  first stage, with the draws of a trial without stages; freeze and probe act on the target.
- The target's data subset and order, its head and its dropout stream are those of the same
  trial without stages: arms that differ only in `intermediate` are paired by seed in all of
  them, and differ only in the encoder the target starts from.
- A stage whose label set equals the previous stage's keeps that head (and the target keeps
  the last stage's), reporting `head_kept` 1; otherwise its head is fresh.
- Results of stage i carry its metrics as `stage<i>_<name>` (`stage0_dev_f1`), `stage` = i and
  `step` counted over the whole trial, so MLflow's steps never go back; the target's results
  keep their own names, learning-curve area and steps to 95% are the target's alone, and its
  final result adds each stage's layer dynamics (`dyn/stage<i>_<measure>/<layer>`, measured
  against the pretrained encoder when the stage ended) and `intermediate_steps`.
- A checkpoint is the running stage's own (trainables/training/train.py) plus `stages.json`: which
  stage, the dynamics carried so far, and the steps and tokens each ended stage ran (a stage's
  own `budget` may end it early), which the target's `step`, `steps_run` and `tokens_seen`
  count on from. Without it the checkpoint is the target's, as every
  checkpoint of a trial without stages is.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from trainables.errors import ConfigError, UserInputError
from trainables.settings.config import STAGE_RUNS, TrialConfig
from trainables.settings.stage_config import (
    HEAD_KEPT,
    INTERMEDIATE_STEPS,
    STAGE_KEY,
    stage_prefix,
    stage_settings,
)
from trainables.training.train import Trial

log = logging.getLogger(__name__)

STATE_FILE = "stages.json"
_DYNAMICS = "dyn/"


def draw_seed(seed: int, index: int) -> int:
    """Stage `index`'s own seed from a trial's seed: well mixed, so no stage of one trial
    shares a stream with another trial's target or stages."""
    return int(np.random.SeedSequence([seed % 2**32, index]).generate_state(1)[0])


def stage_config(config: TrialConfig, index: int) -> TrialConfig:
    """Stage `index` as a trial of its own: its data and the settings it sets (the trial's
    where unset; its budget its own, none: `epochs`), each setting marked `stage_runs` at that
    value (trainables/settings/config.py: no re-initialisation, freeze or probe, all its data,
    no fingerprint, as the target's is the trial's), seeds drawn from the trial's, the trial's
    depth (the weights come from the previous stage), and dynamics measured once at its end."""
    stage = config.stages()[index]
    data_seed = config.seed if config.data_seed is None else config.data_seed
    settings = {**copy.deepcopy(STAGE_RUNS), **stage_settings(stage)}
    return dataclasses.replace(
        config,
        **settings,
        seed=draw_seed(config.seed, index),
        data_seed=draw_seed(data_seed, index),
        dynamics="off" if config.dynamics == "off" else "end",
    )


def target_config(config: TrialConfig) -> TrialConfig:
    return dataclasses.replace(config, intermediate=[])


def _rng_state() -> tuple[torch.Tensor, list[torch.Tensor]]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return torch.get_rng_state(), cuda


class StagedTrial:
    """The stages, then the target, as one resumable trial with `Trial`'s protocol."""

    def __init__(self, config: TrialConfig):
        self.cfg = config
        self.names = [s.name for s in config.stages()]
        # the target first: its surgery and head use the draws of a trial without stages.
        # Each trial seeds the global generator (dropout) as it is built, so the state it
        # leaves is where its own dropout stream starts, whatever is built after it
        self.target = Trial(target_config(config))
        target_rng = _rng_state()
        self.trials: list[Trial] = []
        self._start_rng: list[tuple[torch.Tensor, list[torch.Tensor]]] = []
        for index in range(len(self.names)):
            self.trials.append(self._built(config, index))
            self._start_rng.append(_rng_state())
        self.trials.append(self.target)
        self._start_rng.append(target_rng)
        self.current = 0  # the running trial's index; len(self.names) is the target
        self._started = [False] * len(self.trials)
        self.kept = [False] * len(self.trials)  # kept the previous stage's head
        self.carried: dict[str, float] = {}  # each stage's dynamics, for the final result
        # steps and training tokens of each ended stage (until_plateau may end one early)
        self.spent: list[list[float]] = [[0.0, 0.0] for _ in self.trials]

    def _built(self, config: TrialConfig, index: int) -> Trial:
        """Stage `index`'s trial; what is wrong with its data names the stage first."""
        try:
            return Trial(stage_config(config, index))
        except UserInputError as err:
            raise type(err)(f"intermediate stage {index} ({self.names[index]}): {err}") from None

    # --- what callers read, as of a Trial ---------------------------------------------------
    @property
    def label_map(self):
        return self.target.label_map

    @property
    def model(self):
        return self.target.model

    @property
    def step(self) -> int:
        """Optimizer steps over the whole trial, every stage's included."""
        return self._offset(self.current) + self.trials[self.current].step

    @property
    def fingerprint(self):
        """The final encoder's layer fingerprint: the target's (stages keep none)."""
        return self.target.fingerprint

    @property
    def finished(self) -> bool:
        return self.target.finished

    @property
    def last_metrics(self) -> dict[str, float]:
        return self.target.last_metrics

    def checkpoint_bytes(self) -> int:
        return self.trials[self.current].checkpoint_bytes()

    def _offset(self, index: int) -> int:
        return int(sum(steps for steps, _ in self.spent[:index]))

    # --- the loop ---------------------------------------------------------------------------
    def run(self) -> Iterator[dict[str, float]]:
        for index in range(self.current, len(self.trials)):
            self.current = index
            if not self._started[index]:
                self._begin(index)
            is_target = index == len(self.names)
            for metrics in self.trials[index].run():
                yield self._final(metrics) if is_target else self._stage_result(index, metrics)

    def _begin(self, index: int) -> None:
        """Hand the encoder on (stage 0 takes the target's, as surgery left it), keep the
        previous head where the label sets are equal, and start this trial's dropout stream
        where its own construction left it."""
        trial = self.trials[index]
        source = self.trials[index - 1] if index else self.target
        trial.model.encoder.load_state_dict(source.model.encoder.state_dict())
        if index and trial.label_map == source.label_map:
            trial.model.head.load_state_dict(source.model.head.state_dict())
            self.kept[index] = True
        if index:
            source.optimizer.state.clear()  # the finished stage's Adam moments are not needed
        cpu, cuda = self._start_rng[index]
        torch.set_rng_state(cpu)
        if cuda:
            torch.cuda.set_rng_state_all(cuda)
        self._started[index] = True
        what = "the target" if index == len(self.names) else f"stage {index} ({self.names[index]})"
        head = "keeps the previous stage's head (same labels)" if self.kept[index] else (
            "gets a fresh head"
        )  # fmt: skip
        log.info("%s starts from the encoder of %s and %s: %s", what,
                 f"stage {index - 1}" if index else "the (altered) pretrained model", head,
                 ", ".join(trial.label_map.labels))  # fmt: skip

    def _stage_result(self, index: int, metrics: dict[str, float]) -> dict[str, float]:
        prefix = stage_prefix(index)
        out = {STAGE_KEY: float(index), "step": self._offset(index) + metrics["step"]}
        if metrics.get("final"):  # ended: what later steps and the final result count from
            self.spent[index] = [metrics["steps_run"], metrics["tokens_seen"]]
        for key, value in metrics.items():
            if key.startswith(_DYNAMICS):  # measured at the stage's end: the final result's
                self.carried[_DYNAMICS + prefix + key.removeprefix(_DYNAMICS)] = value
            else:
                out[prefix + key] = value
        if metrics.get("final"):
            out[prefix + HEAD_KEPT] = float(self.kept[index])
        return out

    def _final(self, metrics: dict[str, float]) -> dict[str, float]:
        """A target result, its step counted over the whole trial; the final one also carries
        what the stages measured."""
        offset = self._offset(len(self.names))
        out = {**metrics, "step": offset + metrics["step"]}
        if metrics.get("final"):
            out.update(self.carried)
            out[INTERMEDIATE_STEPS] = float(offset)
            # the whole trial's compute, every stage's included
            out["steps_run"] = float(offset) + metrics["steps_run"]
            out["tokens_seen"] = sum(t for _, t in self.spent[:-1]) + metrics["tokens_seen"]
            out[HEAD_KEPT] = float(self.kept[-1])
        self.target.last_metrics = out
        return out

    # --- state ------------------------------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        """The running stage's checkpoint, and which stage it is."""
        directory = Path(directory)
        self.trials[self.current].save(directory)
        state = {"stage": self.current, "carried": self.carried, "kept": self.kept}
        state["spent"] = self.spent
        (directory / STATE_FILE).write_text(json.dumps(state))

    def save_model(self, folder: str | Path) -> None:
        """The target's tagger, as it was scored at the end."""
        self.target.save_model(folder)

    def restore(self, directory: str | Path) -> None:
        directory = Path(directory)
        saved = directory / STATE_FILE
        state = json.loads(saved.read_text()) if saved.is_file() else {}
        index = int(state.get("stage", len(self.names)))  # none saved: the target's checkpoint
        if not 0 <= index < len(self.trials):
            raise ConfigError(f"{directory}: the checkpoint is of stage {index}, but this trial "
                              f"has {len(self.names)} intermediate stage(s)")  # fmt: skip
        self.trials[index].restore(directory)
        self.current = index
        self._started = [i <= index for i in range(len(self.trials))]
        self.carried = {k: float(v) for k, v in state.get("carried", {}).items()}
        self.kept = [bool(k) for k in state.get("kept", self.kept)]
        # saved before budgets: each ended stage ran its whole step budget, tokens unknown
        ended = [[float(t.total_steps), float("nan")] for t in self.trials[:index]]
        self.spent = state.get("spent") or ended + [[0.0, 0.0] for _ in self.trials[index:]]
