"""A trial's checkpoint: the tagger's weights as safetensors (and, under `until_plateau`, the
best evaluation's weights so far), and everything else that makes a resumed trial continue as
if never stopped (optimizer, schedule, random generators, position, curves, plateau watch) as
plain tensors and numbers that `torch.load(weights_only=True)` reads without running code.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors.torch import load_file, save_file

from trainables.errors import ConfigError
from trainables.measures.fingerprints import FILE_NAME as FINGERPRINT_FILE

if TYPE_CHECKING:
    from trainables.training.train import Trial

MODEL_FILE = "model.safetensors"
BEST_FILE = "best.safetensors"  # until_plateau: the best evaluation's weights so far
STATE_FILE = "trainer_state.pt"


def checkpoint_bytes(trial: Trial) -> int:
    """About what `save` writes: the weights and two Adam moments per trained parameter
    (the optimizer's state is empty until the first step, so it is estimated, not read)."""
    weights = sum(t.numel() * t.element_size() for t in trial.model.state_dict().values())
    trained = sum(p.numel() * p.element_size() for p in trial.model.parameters() if p.requires_grad)
    return weights * (2 if trial.watch is not None else 1) + 2 * trained


def save(trial: Trial, directory: Path) -> None:
    """Weights as safetensors; the rest as plain tensors and numbers (weights_only load)."""
    directory.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().contiguous().cpu() for k, v in trial.model.state_dict().items()}
    save_file(weights, directory / MODEL_FILE)
    if trial.best_weights is not None:
        save_file(trial.best_weights, directory / BEST_FILE)
    state = {
        "optimizer": trial.optimizer.state_dict(),
        "scheduler": trial.scheduler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "position": [trial.step, trial.epoch, trial.batch_in_epoch],
        "eval_steps": list(trial.eval_steps),
        "eval_f1": list(trial.eval_f1),
        "metric_history": list(trial.metric_history),
        "tokens_seen": trial.tokens_seen,
        "plateau": trial.watch.state() if trial.watch is not None else [],
        "stopped": trial.stopped,
        "last_metrics": json.dumps(trial.last_metrics),
        "precision": trial.precision,
    }
    torch.save(state, directory / STATE_FILE)
    if trial.fingerprint is not None:
        trial.fingerprint.save(directory / FINGERPRINT_FILE)


def restore(trial: Trial, directory: Path) -> None:
    state = torch.load(directory / STATE_FILE, weights_only=True, map_location=trial.device)
    saved = state.get("precision")  # None: saved before checkpoints recorded it
    if saved is not None and saved != trial.precision:
        raise ConfigError(
            f"checkpoint {directory} was trained in {saved} and this trial runs in "
            f"{trial.precision}; resume it with precision: {saved}"
        )
    trial.model.load_state_dict(load_file(directory / MODEL_FILE, device=str(trial.device)))
    trial.optimizer.load_state_dict(state["optimizer"])
    trial.scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"].cpu())
    if state["cuda_rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda_rng"]])
    trial.step, trial.epoch, trial.batch_in_epoch = (int(x) for x in state["position"])
    trial.eval_steps = [int(s) for s in state["eval_steps"]]
    trial.eval_f1 = [float(f) for f in state["eval_f1"]]
    trial.last_metrics = json.loads(state.get("last_metrics", "{}"))
    # checkpoints from before budgets: no study-metric history or token count was kept
    trial.metric_history = [float(v) for v in state.get("metric_history", [])]
    trial.tokens_seen = float(state.get("tokens_seen", math.nan))
    trial.stopped = bool(state.get("stopped", False))
    if trial.watch is not None and state.get("plateau"):
        trial.watch.load([float(v) for v in state["plateau"]])
        best = directory / BEST_FILE
        trial.best_weights = load_file(best) if best.is_file() else None
