"""Expand a validated study into arms, samples, seeds and phases.

An arm is one point of the grid's cross product. Everything random inside a trial comes from
its seed, and the seed list is the same in every arm, so two arms compared at seed s saw the
same data subset, the same data order and the same head initialisation: comparisons are
paired. Search (Optuna) and pruning (ASHA) happen inside an arm only; see `study.search`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from study.names import CONFIRM, DRAWN_BY, EXPLORE, factor_value
from study.precision import resolved_precision
from study.spec import StudySpec
from study.spec.phases import MIN_ASHA_SAMPLES
from study.spec.validated import CHECKPOINT_EVERY_S_DEFAULT
from trainables.errors import printable
from trainables.settings import BUDGET, INTERMEDIATE, stage_name


@dataclass(frozen=True)
class Arm:
    """One combination of the structural factors; `id` is how logs, MLflow and reports name it."""

    index: int
    factors: dict[str, Any]

    @property
    def id(self) -> str:
        return ",".join(f"{k}={factor_value(k, v)}" for k, v in self.factors.items())


def arms(spec: StudySpec) -> list[Arm]:
    names = list(spec.grid)
    combos = itertools.product(*(spec.grid[n] for n in names))
    return [Arm(i, dict(zip(names, values, strict=True))) for i, values in enumerate(combos)]


def trial_config(
    spec: StudySpec, arm: Arm, sample: dict[str, Any], seed: int, data_seed: int | None = None
) -> dict[str, Any]:
    """The plain dict a trial is built from (YAML → spec → dict → trainable, docs/design.md).

    Threads follow the trial's CPU reservation so that concurrent trials do not oversubscribe
    the cores Ray gave them, unless the study fixes `threads` itself.
    """
    config: dict[str, Any] = {"model": spec.model, "data": spec.data}
    if spec.model_revision:
        config["model_revision"] = spec.model_revision
    if spec.synthetic:
        config["trainable"] = spec.trainable
    config.update(spec.fixed)
    config.update(arm.factors)
    config.update(sample)
    config["seed"] = seed
    if data_seed is not None:
        config["data_seed"] = data_seed
    config["precision"] = resolved_precision(spec)  # the study's one precision (settled once)
    # what until_plateau watches and final_gain measures: the study's own metric
    config["metric"] = {"name": spec.metric.name, "mode": spec.metric.mode}
    config.setdefault(BUDGET, None)  # logged with every trial, none included
    config.setdefault("threads", max(1, math.floor(spec.resources.get("cpu", 1))))
    if spec.resources.get("gpu", 0) > 0:
        config.setdefault("device", "cuda")
    return {key: _plain(value) for key, value in config.items()}


def _plain(value: Any) -> Any:
    """Tuples from the spec become lists so the config survives JSON and YAML round trips."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def study_tags(
    phase: str,
    arm: Arm,
    sample: int,
    seed: int,
    data_seed: int | None = None,
    drawn_by: str | None = None,
) -> dict[str, Any]:
    """What the orchestration attaches beside the trial config (config key `study`); an explore
    sample also says who drew it (`DRAWN_BY`: the sampler's model or a random draw)."""
    tags = {"phase": phase, "arm": arm.id, "arm_index": arm.index, "sample": sample, "seed": seed}
    if data_seed is not None:
        tags["data_seed"] = data_seed
    if drawn_by is not None:
        tags[DRAWN_BY] = drawn_by
    return tags


def trial_key(tags: dict[str, Any]) -> str:
    """A name for one trial that is stable across driver restarts (Ray's ids are too, but a
    key built from the plan also survives a re-planned confirm phase)."""
    key = f"{tags['phase']}/{tags['arm']}/sample{tags['sample']}/seed{tags['seed']}"
    return key + (f"/data{tags['data_seed']}" if tags.get("data_seed") is not None else "")


def round_name(round_index: int) -> str:
    """The Ray experiment of one confirm round: `confirm`, then `confirm-round1`, ..."""
    return CONFIRM if round_index == 0 else f"{CONFIRM}-round{round_index}"


@dataclass
class PhasePlan:
    name: str
    arms: int
    samples_per_arm: int
    seeds: tuple[int, ...]
    epochs_per_trial: float
    pruning: str
    looks: tuple[int, ...] = ()  # confirm: seed counts after each round (the last = all)
    data_seeds: tuple[int, ...] | None = None  # confirm: crossed with every seed
    steps_per_trial: int | None = None  # every arm's `budget: {steps: N}`, when they share one

    @property
    def trials(self) -> int:
        """At most: rounds stop early once every comparison is decided."""
        crossed = len(self.data_seeds) if self.data_seeds else 1
        return self.arms * self.samples_per_arm * len(self.seeds) * crossed

    @property
    def trial_epochs(self) -> float:
        """An upper bound: ASHA usually stops part of the explore trials early."""
        return self.trials * self.epochs_per_trial


@dataclass
class StudyPlan:
    spec: StudySpec
    arms: list[Arm]
    phases: list[PhasePlan] = field(default_factory=list)

    @property
    def trials(self) -> int:
        return sum(p.trials for p in self.phases)

    def summary(self) -> str:
        """One line for MLflow tags and the log."""
        parts = [f"{len(self.arms)} arms"]
        parts += [f"{p.name}: {p.trials} trials" for p in self.phases]
        return "; ".join(parts)

    def describe(self) -> str:
        """The human-readable plan `--dry-run` prints."""
        spec = self.spec
        lines = [
            f"study {spec.name} (profile {spec.profile or 'base'}): {spec.description}",
            f"  model {spec.model}, data {spec.data}"
            if not spec.synthetic
            else f"  trainable: synthetic surface (no model, no data; no finding) {spec.trainable}",
            f"  metric {spec.metric.name} ({spec.metric.mode}), "
            f"resources per trial {spec.resources}, precision {resolved_precision(spec)}",
            f"  arms ({len(self.arms)}):",
        ]
        lines += [f"    [{a.index}] {a.id}" for a in self.arms]
        lines += self._stage_lines()
        if spec.search:
            searched = ", ".join(f"{k} ~ {d.describe()}" for k, d in spec.search.items())
            lines.append(f"  searched per arm: {searched}")
        for p in self.phases:
            crossed = (
                f" x {len(p.data_seeds)} data seeds {list(p.data_seeds)}" if p.data_seeds else ""
            )
            cost = (
                f"{p.steps_per_trial} optimizer steps each"
                if p.steps_per_trial
                else f"<= {p.trial_epochs:g} trial-epochs"
            )
            lines.append(
                f"  {p.name}: {p.arms} arms x {p.samples_per_arm} samples x "
                f"{len(p.seeds)} seeds {list(p.seeds)}{crossed} = {p.trials} trials, "
                f"{cost} ({p.pruning})"
            )
            if len(p.looks) > 1:
                lines.append(f"    rounds: seeds after each round {list(p.looks)}; a round runs "
                             "only the arms with an undecided comparison")  # fmt: skip
        lines += self._seed_lines() + self._analysis_lines()
        lines.append(f"  total: at most {self.trials} trials")
        return printable("\n".join(lines), lines=True)  # a description's ESC or BEL escaped

    def _stage_lines(self) -> list[str]:
        """What each arm trains before the target, when a study has intermediate stages."""
        spec = self.spec
        lists = spec.grid.get(INTERMEDIATE) or [spec.fixed.get(INTERMEDIATE) or []]
        described = [
            " -> ".join([*(_stage_text(s, i) for i, s in enumerate(stages)), "target"])
            for stages in lists
            if stages
        ]  # fmt: skip
        return [f"  stages: {text}" for text in described]

    def _seed_lines(self) -> list[str]:
        explore = next((p for p in self.phases if p.name == EXPLORE), None)
        confirm = next((p for p in self.phases if p.name == CONFIRM), None)
        if not (explore and confirm):
            return []
        shared = sorted(set(explore.seeds) & set(confirm.seeds))
        if not shared:
            return ["  seeds: explore and confirm share none (the seeds that choose never "
                    "estimate)"]  # fmt: skip
        return [f"  seeds: confirm reuses explore seeds {shared} (reuse_explore_seeds: true): "
                "their explore trials of the chosen sample count as confirm trials"]  # fmt: skip

    def _analysis_lines(self) -> list[str]:
        a = self.spec.analysis
        return [f"  analysis (declared): primary {a.primary}, margin {a.margin:g}, "
                f"alpha {a.alpha:g}, spending {a.spending}; other metrics exploratory"]  # fmt: skip


def _stage_text(stage: dict, index: int) -> str:
    settings = {k: v for k, v in stage.items() if k != "name"}
    return f"{stage_name(stage, index)} {settings}"


def _epochs(spec: StudySpec, arm: Arm) -> float:
    """An arm's epochs at most: `until_plateau`'s max_epochs, else `epochs` (a `steps` budget's
    epochs depend on the data size, unknown here: `epochs` stands in for them)."""
    budget = arm.factors.get(BUDGET, spec.fixed.get(BUDGET)) or {}
    if "until_plateau" in budget:
        return float(budget["until_plateau"]["max_epochs"])
    if "epochs" in arm.factors:
        return float(arm.factors["epochs"])
    if "epochs" in spec.search:
        return float(spec.search["epochs"].largest())
    return float(spec.fixed.get("epochs", 3))


def shared_steps(spec: StudySpec, arms: list[Arm]) -> int | None:
    """The optimizer steps of every trial when all arms train a `steps` budget of the same
    size (paired arms then get equal steps by construction); else None."""
    steps = {(arm.factors.get(BUDGET, spec.fixed.get(BUDGET)) or {}).get("steps") for arm in arms}
    return steps.pop() if len(steps) == 1 and None not in steps else None


def max_epochs(spec: StudySpec, arm: Arm) -> float:
    """ASHA's max_t for an arm, in epochs (the time unit of every rung)."""
    return _epochs(spec, arm)


def make_plan(spec: StudySpec) -> StudyPlan:
    plan = StudyPlan(spec, arms(spec))
    mean_epochs = sum(_epochs(spec, a) for a in plan.arms) / max(1, len(plan.arms))
    if spec.explore is not None:
        asha = spec.explore.asha
        pruning = (
            f"ASHA per arm, grace {asha.grace_period:g} epochs, reduction {asha.reduction_factor:g}"
            if asha
            else "no pruning"
        )
        if asha and spec.explore.samples < MIN_ASHA_SAMPLES:
            pruning += (f"; with {spec.explore.samples} samples per arm (< {MIN_ASHA_SAMPLES}) "
                        "each rung's first sample goes on uncompared")  # fmt: skip
        pruning += f"; {_checkpoint_cadence(checkpoint_every_s(spec, EXPLORE))}"
        plan.phases.append(
            PhasePlan(
                EXPLORE,
                len(plan.arms),
                spec.explore.samples,
                spec.explore.seeds,
                mean_epochs,
                pruning,
                steps_per_trial=shared_steps(spec, plan.arms),
            )
        )
    if spec.confirm is not None:
        samples = 1 if isinstance(spec.confirm.select, str) else len(spec.confirm.select)
        plan.phases.append(
            PhasePlan(
                CONFIRM,
                len(plan.arms),
                samples,
                spec.confirm.seeds,
                mean_epochs,
                f"never pruned; {_checkpoint_cadence(checkpoint_every_s(spec, CONFIRM))}",
                spec.confirm.looks,
                spec.confirm.data_seeds,
                shared_steps(spec, plan.arms),
            )
        )
    return plan


def checkpoint_every_s(spec: StudySpec, phase: str) -> float:
    """The least seconds between a trial's checkpoints in `phase`. 0 (one at every evaluation)
    for explore's trials under ASHA, whose paused seeds resume from their last checkpoint;
    otherwise `phases.confirm.checkpoint_every_s` (its default in a study without confirm): a
    trial never paused needs a checkpoint only to bound what a crash or Ctrl-C retrains, and
    each one costs a write of the weights, the best weights and the optimizer state."""
    if phase == EXPLORE and spec.explore is not None and spec.explore.asha:
        return 0.0
    return spec.confirm.checkpoint_every_s if spec.confirm else CHECKPOINT_EVERY_S_DEFAULT


def _checkpoint_cadence(every_s: float) -> str:
    """How often a trial checkpoints, as the plan says it."""
    return f"a checkpoint at most every {every_s:g} s" if every_s else "a checkpoint per evaluation"
