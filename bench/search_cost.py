"""What building bench/search_efficiency.py's cache costs, said before it trains: the grid's
missing points and the contender repetitions not cached yet, at most their trials x the
budget's max epochs, at a stated time per trial-epoch (`--epoch-s`, or this precision's
figure from docs/benchmarks.md), so many trials at once as Ray's CPUs allow."""

from __future__ import annotations

import os

from search_outputs import say

from study.plan import make_plan, max_epochs
from study.precision import resolved_precision
from trainables.settings import BUDGET

# seconds per trial-epoch of one 1-thread ner_depth default trial, two at once on the 2-core
# machine, its evaluations and checkpoints included (docs/benchmarks.md: 94 s measured in fp32
# on a CPU without native bf16, 24.7 s in bf16 on one with AVX-512 BF16)
EPOCH_S = {"fp32": 95.0, "bf16": 25.0, "synthetic": 0.3}
# that trial's epoch in optimizer steps (WNUT-16's 1,676 training sentences in batches of 16):
# a `steps` budget is counted in these trial-epochs, since study.plan, which does not read the
# data, counts such a trial as its `epochs` setting
STEPS_PER_EPOCH = 105


def at_once(args, spec) -> int:
    """How many trials run at once: Ray's CPUs over a trial's."""
    return max(1, int((args.num_cpus or os.cpu_count() or 1) // spec.resources.get("cpu", 1)))


def _duration(args, spec, epochs: float, terse: bool = False) -> str:
    """`epochs` trial-epochs as wall time, at the stated (or --epoch-s) seconds per epoch (terse:
    the time alone)."""
    precision = "synthetic" if spec.synthetic else resolved_precision(spec)
    per_epoch, trials = args.epoch_s or EPOCH_S[precision], at_once(args, spec)
    seconds = epochs * per_epoch / trials
    units = ((3600, "h", ".1f"), (60, "min", ".0f"), (1, "s", ".0f"))
    size, unit, form = next(u for u in units if seconds >= u[0] or u[0] == 1)
    took = f"{seconds / size:{form}} {unit}"
    if terse:
        return f"about {took}"
    source = "--epoch-s" if args.epoch_s else f"stated for {precision}"
    return (f"about {took} at {per_epoch:g} s per trial-epoch ({source}), "
            f"{trials} trials at once")  # fmt: skip


def trial_epochs(spec, arm) -> float:
    """An arm's longest trial in the stated figures' trial-epochs."""
    budget = arm.factors.get(BUDGET, spec.fixed.get(BUDGET)) or {}
    if "steps" in budget:
        return budget["steps"] / STEPS_PER_EPOCH
    return max_epochs(spec, arm)


def longest_trial(spec) -> float:
    return max(trial_epochs(spec, a) for a in make_plan(spec).arms)


def estimate_grid(args, spec, todo: int) -> None:
    """What building the grid's missing points costs at most."""
    epochs = todo * len(args.grid_seeds) * longest_trial(spec)
    say(args, f"building the grid cache: {todo} (arm, lr) points x {len(args.grid_seeds)} "
        f"seeds, at most {epochs:.0f} trial-epochs: {_duration(args, spec, epochs)}")  # fmt: skip


def estimate_contenders(args, spec, todo: int, measured: list[float]) -> None:
    """What `todo` contender repetitions cost at most (ASHA and plateaus stop many sooner), and
    at the mean trial-epochs of the `measured` (cached) ones."""
    if todo:
        trials = spec.explore.samples * len(spec.explore.seeds) * len(make_plan(spec).arms)
        epochs = todo * trials * longest_trial(spec)
        likely = ""
        if measured:
            mean = sum(measured) / len(measured)
            likely = (f"; at the {len(measured)} cached ones' mean of {mean:.0f} trial-epochs, "
                      f"{_duration(args, spec, todo * mean, terse=True)}")  # fmt: skip
        say(args, f"contender repetitions not cached: {todo}, at most {epochs:.0f} "
            f"trial-epochs (ASHA and plateaus stop many trials sooner): "
            f"{_duration(args, spec, epochs)}{likely}")  # fmt: skip
    elif args.estimate:
        say(args, "every contender repetition is cached")
