"""Where a training step's time goes: the loop's phases, then torch.profiler's top ops.

The `profile` part of bench/cpu_utilisation.py, kept apart so that script stays about the
ratio it measures. `measure_profile` runs in the part's own process (its thread count and
precision set before torch does any work); `print_profile` prints what it returns.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable


class Phases:
    """Wall seconds per named phase, collected by wrapping the callables a step goes through."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def wrap(self, name: str, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started

        return timed


class _FirstEvaluation(Exception):
    """Raised in place of the dev evaluation: the steps before it are what is measured."""


def timed_loop(trial, phases: Phases) -> float:
    """Seconds of `Trial.run()` up to its first evaluation, with its phases wrapped. Patches only
    this process's objects: the module-level names train.py looks up at call time, the trial's
    own methods, and `Tensor.backward` (restored afterwards)."""
    import torch

    from trainables.training import train

    def first_evaluation(**_options):
        raise _FirstEvaluation

    model, optimizer = trial.model, trial.optimizer
    model.forward = phases.wrap("forward + loss", model.forward)
    optimizer.step = phases.wrap("optimizer step (AdamW)", optimizer.step)
    optimizer.zero_grad = phases.wrap("zero_grad", optimizer.zero_grad)
    trial.scheduler.step = phases.wrap("lr scheduler", trial.scheduler.step)
    trial._batches_of_epoch = phases.wrap("batch order", trial._batches_of_epoch)
    trial._evaluate_dev = first_evaluation
    saved = train.collate, train.clip_gradients, torch.Tensor.backward
    train.collate = phases.wrap("collate (pad, to tensors)", train.collate)
    train.clip_gradients = phases.wrap("clip grad norm", saved[1])
    torch.Tensor.backward = phases.wrap("backward", saved[2])
    started = time.perf_counter()
    try:
        next(trial.run())
    except _FirstEvaluation:
        pass
    finally:
        train.collate, train.clip_gradients, torch.Tensor.backward = saved
    return time.perf_counter() - started


def top_ops(trial, steps: int, limit: int) -> list[dict]:
    """torch.profiler over `steps` more steps, ops ranked by self CPU time."""
    from torch.profiler import ProfilerActivity, profile

    batches = trial._batches_of_epoch()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch_ids in batches[:steps]:
            trial._train_step(batch_ids)
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events)
    return [
        {
            "op": e.key,
            "ms_per_step": e.self_cpu_time_total / 1e3 / steps,
            "share": e.self_cpu_time_total / total,
            "calls_per_step": e.count / steps,
        }
        for e in events[:limit]
    ]


def measure_profile(make_trial: Callable, steps: int, warmup: int, profiler_steps: int,
                    top: int) -> dict:  # fmt: skip
    """`make_trial(steps)` builds the trial; its start-up, then `steps` phase-timed steps of
    `Trial.run()` after `warmup` untimed ones, then `profiler_steps` under torch.profiler."""
    from trainables.training import train

    encode_seconds = {"s": 0.0}
    original_encode = train.encode

    def timed_encode(*a, **k):
        started = time.perf_counter()
        try:
            return original_encode(*a, **k)
        finally:
            encode_seconds["s"] += time.perf_counter() - started

    train.encode = timed_encode
    started = time.perf_counter()
    trial = make_trial(steps)
    init = time.perf_counter() - started
    train.encode = original_encode
    for batch_ids in trial._batches_of_epoch()[-warmup:]:
        trial._train_step(batch_ids)  # warm-up on batches the timed steps do not reach first
    phases = Phases()
    loop = timed_loop(trial, phases)
    return {
        "steps": steps,
        "precision": trial.precision,
        "loop_seconds": loop,
        "phases": dict(phases.seconds),
        "init_seconds": init,
        "tokenise_seconds": encode_seconds["s"],
        "top_ops": top_ops(trial, profiler_steps, top),
    }


def print_profile(p: dict, threads: int) -> None:
    steps, loop = p["steps"], p["loop_seconds"]
    phases = dict(p["phases"])
    phases["other (python, loss.item, bookkeeping)"] = loop - sum(phases.values())
    print(f"\nwhere a step goes: Trial.run() for {steps} steps at {threads} thread(s) in "
          f"{p['precision']}, {loop / steps * 1e3:.0f} ms per step")  # fmt: skip
    for name, seconds in sorted(phases.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<40}{seconds / steps * 1e3:>8.1f} ms{seconds / loop:>8.1%}")
    core = ("forward + loss", "backward", "optimizer step (AdamW)")
    outside = loop - sum(phases.get(k, 0.0) for k in core)
    print(f"  outside forward/backward/optimizer: {outside / loop:.1%} of the step")
    print(
        f"  tokenisation: none in the loop (windows are encoded once at trial start: "
        f"{p['tokenise_seconds']:.1f} s of {p['init_seconds']:.1f} s start-up)"
    )
    print("top ops by self CPU time (torch.profiler):")
    for op in p["top_ops"]:
        print(f"  {op['op'][:48]:<50}{op['ms_per_step']:>8.1f} ms/step{op['share']:>8.1%}"
              f"{op['calls_per_step']:>7.0f} calls/step")  # fmt: skip
