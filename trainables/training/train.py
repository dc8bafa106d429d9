"""One training run of the tagger, resumable, deterministic on CPU given its seed.

    trial = Trial(TrialConfig.from_dict(config))
    for metrics in trial.run():   # one dict per dev evaluation; the last has final=1
        trial.save(checkpoint_dir) # at any yield, the full state is consistent

Everything random comes from two seeds. `data_seed` (by default the trial seed) fixes the data
subset and order (through `nested_fraction_indices` and `train_batches`); `seed` fixes the head
and re-initialised weights (through one explicit generator) and dropout (through the global
torch generator, which dropout cannot avoid; it is seeded here and saved in checkpoints).

The command line that runs one trial (`python -m trainables`) is in trainables/__main__.py.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from trainables.data.batching import collate, eval_batches, train_batches
from trainables.data.encoding import IGNORE_INDEX, EncodedSplit, decode, encode
from trainables.data.sources import Splits, load_checked_splits
from trainables.data.subsets import nested_fraction_indices
from trainables.data.types import TaggedSentence
from trainables.errors import ConfigError, TrainingDiverged
from trainables.measures import dynamics
from trainables.measures.fingerprints import LayerFingerprint
from trainables.measures.fingerprints.capture import take_fingerprint
from trainables.model.device import autocast, resolve_device, trial_precision
from trainables.model.embedding_gradient import row_gradient_tables
from trainables.model.memory import keep_freed_memory
from trainables.model.tagger import Tagger, build_tagger, load_encoder
from trainables.settings.budget import (
    PLATEAU_STOPPED,
    PlateauWatch,
    check_patience,
    evaluations_per_epoch,
)
from trainables.settings.config import TrialConfig
from trainables.settings.reported import each_time_test_name
from trainables.training import checkpoint
from trainables.training.curves import final_gain
from trainables.training.metrics import (
    entity_scores,
    learning_curve_area,
    steps_to_fraction_of_final,
)
from trainables.training.optimization import clip_gradients, make_optimizer, step_budget

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)


def _set_up_process(cfg: TrialConfig) -> tuple[torch.device, str]:
    """Allocator, thread pools, device and precision for this process. bf16 on a CPU without
    native bf16 is refused here, before any data is read."""
    keep_freed_memory()  # the embedding gradient is made and freed every step
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
        # numpy's BLAS (the SVDs of layer dynamics) would otherwise take every core and
        # crawl when trials share them: measured 15 s instead of 4 s per trial
        threadpool_limits(cfg.threads, user_api="blas")  # torch sets its own OpenMP pool
    device = resolve_device(cfg.device)
    return device, trial_precision(device, cfg.precision)


def _build_model(
    cfg: TrialConfig, num_labels: int, device: torch.device
) -> tuple[Tagger, PreTrainedTokenizerBase]:
    """Encoder + head on `device`. The seed is set first: the head and re-initialised weights
    come from one explicit generator, dropout from the global one, which it cannot avoid."""
    torch.manual_seed(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    model, tokenizer = build_tagger(
        cfg.model,
        num_labels,
        generator=generator,
        architecture=cfg.architecture(),
        revision=cfg.model_revision,
    )
    model.to(device)
    return model, tokenizer


class Trial:
    """One training run, set up by the steps of `__init__` in order, then trained by `run`."""

    def __init__(self, config: TrialConfig):
        if (
            config.intermediate
        ):  # a staged trial is a chain of these (trainables/training/stages.py)
            raise ConfigError("a trial with intermediate stages is built by trials.new_trial")
        self.cfg = config
        self.device, self.precision = _set_up_process(config)
        # two random streams, so a study can vary initialisation and data order separately
        self.data_seed = config.seed if config.data_seed is None else config.data_seed
        splits, self.label_map = load_checked_splits(config.data)
        # per evaluation set with a label map: gold entities, renamed, made O (final metrics)
        self.relabelled = {w.removeprefix("extra."): r for w, r in splits.relabelled.items()}
        self.model, self.tokenizer = _build_model(config, len(self.label_map), self.device)
        self._encode_splits(splits)
        self._choose_dynamics_sample()
        self.batches_per_epoch, self.total_steps = step_budget(config, len(self.train_lengths))
        self.watch = self._plateau_watch()
        self.optimizer, self.scheduler = make_optimizer(
            self.model, config, self.device, self.total_steps
        )
        self.trained = [p for p in self.model.parameters() if p.requires_grad]
        self.row_tables = row_gradient_tables(self.model)  # clipped over their written rows
        self._start_at_step_zero()
        log.info(
            "trial: %d train windows (fraction %.3g), %d steps, %d labels, device %s, %s",
            len(self.train_lengths),
            config.data_fraction,
            self.total_steps,
            len(self.label_map),
            self.device,
            self.precision,
        )

    def _encode_splits(self, splits: Splits) -> None:
        """Sub-word windows of this trial's training subset and of every evaluation set."""
        keep = nested_fraction_indices(len(splits.train), self.cfg.data_fraction, self.data_seed)
        self.train_split = self._encoded([splits.train[i] for i in keep])
        eval_sets = {"dev": splits.dev, "test": splits.test, **splits.extra}
        self.eval_splits = {name: self._encoded(s) for name, s in eval_sets.items()}
        self.train_lengths = [len(w) for w in self.train_split.windows]

    def _encoded(self, sentences: list[TaggedSentence]) -> EncodedSplit:
        return encode(
            sentences,
            self.tokenizer,
            self.label_map,
            max_length=self.cfg.max_length,
            label_all_subwords=self.cfg.label_all_subwords,
        )

    def _choose_dynamics_sample(self) -> None:
        """The dev windows layer dynamics are measured on; the pretrained encoder they are
        measured against is loaded at the first measurement, not before."""
        cfg = self.cfg
        self.dynamics_sample = (
            dynamics.dev_sample(
                self.eval_splits["dev"], self.tokenizer.pad_token_id, cfg.dynamics_sentences
            )
            if cfg.dynamics != "off"
            else []
        )
        self._reference: torch.nn.Module | None = None
        self.fingerprint: LayerFingerprint | None = None  # taken after the last step, if on

    def _plateau_watch(self) -> PlateauWatch | None:
        """The `until_plateau` rule on the study metric, its patience checked against the
        evaluations its steps hold (known only now, with the data); None for other budgets."""
        budget = self.cfg.parsed_budget()
        if budget is None or budget.until_plateau is None:
            return None
        if self.cfg.eval_every:
            check_patience(budget.until_plateau, math.ceil(self.total_steps / self.cfg.eval_every))
        window = evaluations_per_epoch(self.batches_per_epoch, self.cfg.eval_every)
        return PlateauWatch(budget.until_plateau, self.cfg.metric_mode, window)

    def _start_at_step_zero(self) -> None:
        """Position and history: everything `save` writes beyond the modules."""
        self.step = 0
        self.epoch = 0
        self.batch_in_epoch = 0
        self.eval_steps: list[int] = []
        self.eval_f1: list[float] = []
        self.metric_history: list[float] = []  # the study metric at each evaluation
        self.tokens_seen = 0.0  # non-padding training tokens (special tokens included)
        self.stopped = False  # until_plateau stopped before its last step
        self.best_weights: dict[str, torch.Tensor] | None = None  # until_plateau's best
        self.last_metrics: dict[str, float] = {}  # what the latest evaluation yielded
        self._epoch_batches: tuple[int, list[list[int]]] | None = None

    # --- the loop -------------------------------------------------------------------------
    def run(self) -> Iterator[dict[str, float]]:
        cfg = self.cfg
        self.model.train()
        loss_sum, loss_count, tokens, busy = 0.0, 0, 0, 0.0
        while not self.finished:
            started = time.perf_counter()
            batch_ids = self._batches_of_epoch()[self.batch_in_epoch]
            if cfg.fail_at_step is not None and self.step + 1 == cfg.fail_at_step:
                raise RuntimeError(f"injected failure at step {self.step + 1} (fail_at_step)")
            loss, n_tokens = self._train_step(batch_ids)
            loss_sum, loss_count, tokens = loss_sum + loss, loss_count + 1, tokens + n_tokens
            self.tokens_seen += n_tokens
            self.step += 1
            self.batch_in_epoch += 1
            epoch_ended = self.batch_in_epoch == self.batches_per_epoch
            if epoch_ended:
                self.epoch, self.batch_in_epoch = self.epoch + 1, 0
            busy += time.perf_counter() - started
            done = self.step == self.total_steps
            due = self.step % cfg.eval_every == 0 if cfg.eval_every else epoch_ended
            if due or done:
                metrics = {
                    "step": self.step,
                    "epoch": self.step / self.batches_per_epoch,
                    "train_loss": loss_sum / loss_count,
                    "lr": self.scheduler.get_last_lr()[0],
                    "train_tokens_per_s": tokens / busy if busy else 0.0,
                    # until_plateau scores dev per type on the weights it keeps, at its end
                    **self._evaluate_dev(per_type=done and self.watch is None),
                }
                # the n-th evaluation: seeds of one sample can differ in steps per epoch
                # (different subsets, windows), but their n-th evaluations correspond
                metrics["evaluation"] = float(len(self.eval_steps))
                self.metric_history.append(float(metrics.get(cfg.metric_name, math.nan)))
                done = self._plateau_reached(metrics) or done
                if done:
                    metrics.update(self._final_metrics())
                if cfg.dynamics == "each_eval" or (done and cfg.dynamics == "end"):
                    metrics.update(self.layer_dynamics())
                if done and cfg.keeps_fingerprint:
                    self.fingerprint, cost = take_fingerprint(
                        self.model.encoder, self.dynamics_sample, cfg
                    )
                    metrics.update(cost)
                loss_sum, loss_count, tokens, busy = 0.0, 0, 0, 0.0
                self.last_metrics = metrics
                yield metrics

    @property
    def finished(self) -> bool:
        """True once the last step ran: a trial restored from its final checkpoint has nothing
        left to train, and its caller should re-publish `last_metrics` instead."""
        return self.step >= self.total_steps or self.stopped

    def _plateau_reached(self, metrics: dict[str, float]) -> bool:
        """Under `until_plateau`, take this evaluation: keep its weights if it is the best,
        and say whether patience ran out (the trial then ends here)."""
        if self.watch is None:
            return False
        name = self.cfg.metric_name
        if name not in metrics:
            raise ConfigError(f"trial setting metric={self.cfg.metric!r} is not allowed with "
                              f"budget until_plateau: no evaluation reports {name!r}")  # fmt: skip
        if self.watch.update(metrics[name], self.step, len(self.eval_steps)):
            state = self.model.state_dict()
            self.best_weights = {k: v.detach().to("cpu", copy=True) for k, v in state.items()}
        self.stopped = self.watch.stop
        return self.stopped

    def _batches_of_epoch(self) -> list[list[int]]:
        if self._epoch_batches is None or self._epoch_batches[0] != self.epoch:
            order = train_batches(
                self.train_lengths, self.cfg.batch_size, self.data_seed, self.epoch
            )
            self._epoch_batches = (self.epoch, order)
        return self._epoch_batches[1]

    def _train_step(self, batch_ids: list[int]) -> tuple[float, int]:
        windows = [self.train_split.windows[i] for i in batch_ids]
        batch = {
            k: v.to(self.device) for k, v in collate(windows, self.tokenizer.pad_token_id).items()
        }
        with autocast(self.device, self.precision):
            _, loss = self.model(**batch)
        if not torch.isfinite(loss):
            raise TrainingDiverged(
                f"loss became {loss.item()} at step {self.step + 1} "
                f"(lr={self.scheduler.get_last_lr()[0]:.3g}); {TrainingDiverged.INVALID}"
            )
        loss.backward()
        clip_gradients(self.trained, self.cfg.max_grad_norm, self.row_tables)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.item(), int(batch["attention_mask"].sum())

    # --- evaluation -----------------------------------------------------------------------
    @torch.no_grad()
    def predict(self, split: EncodedSplit) -> tuple[list[list[str]], float]:
        """Word-level tags for every sentence of a split, and the mean loss over its labelled
        tokens (each batch's mean weighted by its labelled tokens, so the batching does not
        change it)."""
        self.model.eval()
        lengths = [len(w) for w in split.windows]
        predictions: list[np.ndarray | None] = [None] * len(lengths)
        loss_sum, loss_tokens = 0.0, 0
        for ids in eval_batches(lengths, self.cfg.eval_batch_tokens):
            windows = [split.windows[i] for i in ids]
            batch = {
                k: v.to(self.device)
                for k, v in collate(windows, self.tokenizer.pad_token_id).items()
            }
            with autocast(self.device, self.precision):
                logits, loss = self.model(**batch)
            labelled = int((batch["labels"] != IGNORE_INDEX).sum())
            if loss is not None and labelled and torch.isfinite(loss):
                loss_sum, loss_tokens = loss_sum + loss.item() * labelled, loss_tokens + labelled
            best = logits.argmax(-1).cpu().numpy()
            for row, i in enumerate(ids):
                predictions[i] = best[row]
        self.model.train()
        return decode(split, predictions, self.label_map), loss_sum / max(1, loss_tokens)

    def score(self, name: str, per_type: bool = False) -> dict[str, float]:
        split = self.eval_splits[name]
        predicted, loss = self.predict(split)
        lenient = entity_scores(split.gold, predicted, mode="conlleval")
        strict = entity_scores(split.gold, predicted, mode="strict")
        out = lenient.flat(name) if per_type else {f"{name}_f1": lenient.f1}
        out.update({f"{name}_precision": lenient.precision, f"{name}_recall": lenient.recall})
        out.update({f"{name}_f1_strict": strict.f1, f"{name}_loss": loss})
        return out

    def _evaluate_dev(self, per_type: bool = False) -> dict[str, float]:
        out = self.score("dev", per_type=per_type)
        self.eval_steps.append(self.step)
        self.eval_f1.append(out["dev_f1"])
        if self.cfg.eval_extra_each_time:
            for name in self.eval_splits.keys() - {"dev", "test"}:
                out.update(self.score(name))
        if self.cfg.eval_test_each_time:  # these weights, before until_plateau's are restored
            test = self.score("test")
            out.update({each_time_test_name(k): v for k, v in test.items()})
        return out

    def _final_metrics(self) -> dict[str, float]:
        out: dict[str, float] = {"final": 1.0, "curve_area": learning_curve_area(self.eval_f1)}
        out.update(self.budget_metrics())
        if self.watch is not None:  # the best evaluation's weights, dev scored on them again
            if self.best_weights is not None:
                self.model.load_state_dict(self.best_weights)
            out.update(self.score("dev", per_type=True))
            out["best_step"] = float(self.watch.best_step)
            out["best_evaluation"] = float(self.watch.best_evaluation)
        reached = steps_to_fraction_of_final(self.eval_steps, self.eval_f1)
        out["steps_to_95"] = float(reached) if reached is not None else float("nan")
        for name, split in self.eval_splits.items():
            if name != "dev":  # the last evaluation just scored dev, per type included
                out.update(self.score(name, per_type=True))
            out[f"{name}_windowed_sentences"] = float(split.windowed_sentences)
        for name, counts in self.relabelled.items():
            out.update(counts.metrics(name))
        return out

    def budget_metrics(self) -> dict[str, float]:
        """What the trial spent and whether it had stopped learning: `steps_run` (optimizer
        steps), `tokens_seen` (non-padding training tokens), `final_gain` of the study
        metric over its curve as trained (trainables/training/curves.py) and
        `plateau_stopped`, 1 when `until_plateau`'s patience ended it before its last step."""
        return {
            "steps_run": float(self.step),
            "tokens_seen": float(self.tokens_seen),
            "final_gain": final_gain(self.metric_history, self.cfg.metric_mode),
            PLATEAU_STOPPED: float(self.stopped),
        }

    def layer_dynamics(self) -> dict[str, float]:
        """How far each layer is from the pretrained encoder, as `dyn/<measure>/<layer>`,
        plus `dynamics_s`, its cost in seconds (the budget is 10% of a trial)."""
        started = time.perf_counter()
        if self._reference is None:
            self._reference, _ = load_encoder(self.cfg.model, self.cfg.model_revision)
            self._reference.to(self.device)
        values = dynamics.layer_dynamics(self.model.encoder, self._reference, self.dynamics_sample)
        out = {
            f"dyn/{name}/{layer}": float(value)
            for name, per_layer in values.items()
            for layer, value in enumerate(per_layer)
        }
        out["dynamics_s"] = time.perf_counter() - started
        return out

    # --- state (trainables/training/checkpoint.py) ------------------------------------------
    def checkpoint_bytes(self) -> int:
        """About what `save` writes (the checkpoint module says how it is estimated)."""
        return checkpoint.checkpoint_bytes(self)

    def save(self, directory: str | Path) -> None:
        """The full state, consistent at any yield of `run`, into `directory`."""
        checkpoint.save(self, Path(directory))

    def save_model(self, folder: str | Path) -> None:
        """The tagger as it was scored at the end (under until_plateau, the best evaluation's
        weights), as a Hugging Face folder with its tokenizer and label map."""
        from trainables.model.export import save_hf_folder

        save_hf_folder(self.model, self.tokenizer, self.label_map, folder)

    def restore(self, directory: str | Path) -> None:
        checkpoint.restore(self, Path(directory))
