"""Search and pruning that respect arms and seeds.

Why not Ray's stock OptunaSearch + ASHAScheduler: they treat every trial as an independent
point, so ASHA would compare a depth-11 trial with a depth-12 trial (arms converge at
different speeds, and that speed is what the study measures) and could stop seed 3 of a
sample while keeping seed 1 (the comparison would then be decided by pruning seeds). Here:

- `ArmSearcher` keeps one seeded Optuna study per arm, asks it for a sample through the
  ask/tell interface, and emits that sample once per seed, seeds of a sample back to back.
- It also keeps the *sample book*: each seed's dev metric at each evaluation. When every seed
  of a sample has reported an evaluation, their mean is fed to that arm's own Ray
  `AsyncHyperBandScheduler` as if the sample were one trial; its decision applies to all
  seeds of the sample together.
- `ArmAwareASHA` is the Tune scheduler: it only asks the book. The book lives in the searcher
  because Tune checkpoints searcher state with the experiment and does not checkpoint
  scheduler state, so a resumed study keeps its rungs and its Optuna history.
- A seed that reaches its arm's last rung before its siblings is paused until they get there,
  so no seed can finish while the rest of its sample is still to be judged (seeds would
  otherwise split: one completed, the others pruned a moment later).
- Optuna is told each sample's mean final value when all its seeds completed, or PRUNED with
  the last rung mean it reached, or FAIL if a seed errored; never a truncated value as final.
"""

from __future__ import annotations

import logging
import math
import pickle
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState
from ray.tune.schedulers import AsyncHyperBandScheduler, FIFOScheduler, TrialScheduler
from ray.tune.search import Searcher

from study.names import CONFIRM, EXPLORE, STUDY_TAGS, TRIAL_CONFIG
from study.plan import Arm, max_epochs, study_tags, trial_config
from study.sample_space import finite_points, optuna_distribution
from study.spec import StudySpec

log = logging.getLogger(__name__)
optuna.logging.set_verbosity(optuna.logging.WARNING)

ASHA_METRIC = "seed_mean"
TIME_ATTR = "epoch"  # every trial reports `epoch`; rungs are in epochs


MAX_REPEATS = 50  # Optuna asks before an unused point of a finite space is taken in order


@dataclass
class _SampleHandle:
    """Stands in for a Tune trial when a whole sample is put before Ray's ASHA."""

    trial_id: str


@dataclass
class SampleRecord:
    """One Optuna sample of one arm, replicated over seeds."""

    arm: str
    index: int
    params: dict[str, Any]
    optuna_number: int
    seeds: tuple[int, ...]
    # seed -> evaluation index -> (epoch, metric)
    reports: dict[int, dict[int, tuple[float, float]]] = field(default_factory=dict)
    fed_steps: list[int] = field(default_factory=list)  # evaluation indices put to ASHA
    rung_means: list[tuple[float, float]] = field(default_factory=list)  # (epoch, mean)
    stopped_at: float | None = None  # epoch at which ASHA stopped the sample
    abandoned: bool = False  # a seed errored: the sample can no longer be judged
    outcome: dict[int, str] = field(default_factory=dict)  # seed -> completed/pruned/errored
    final: dict[int, float] = field(default_factory=dict)  # seed -> final metric
    told: bool = False

    @property
    def key(self) -> str:
        return f"{self.arm}#{self.index}"


class _SavedSearcher(Searcher):
    """Tune checkpoints a searcher with the experiment by calling save/restore; the whole
    state is pickled. The file is our own, written by `save` inside the experiment's folder,
    never user input. Restoring updates the object in place, so the scheduler that holds a
    reference to it sees the restored state."""

    max_running: int | None = None  # set by the scheduler; None: as many as resources allow
    active_trials: int = 0  # running + pending, refreshed by the scheduler at every step

    def _room(self) -> bool:
        """Tune starts every pending trial that fits the resources without asking the
        scheduler, so a concurrency limit must stop trials from being created at all."""
        return self.max_running is None or self.active_trials < self.max_running

    def _admitted(self, config: dict) -> dict:
        self.active_trials += 1
        return config

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as out:
            pickle.dump(self.__dict__, out)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as src:
            self.__dict__.update(pickle.load(src))


class ArmSearcher(_SavedSearcher):
    """Explore phase: per-arm seeded TPE samples, each run once per seed; owns the sample book."""

    def __init__(self, spec: StudySpec, arms: list[Arm], *, sampler_seed: int = 0):
        super().__init__(metric=spec.metric.name, mode=spec.metric.mode)
        assert spec.explore is not None
        self._spec = spec
        self._arms = arms
        self._seeds = tuple(spec.explore.seeds)
        self._distributions = {k: optuna_distribution(d) for k, d in spec.search.items()}
        direction = "maximize" if spec.metric.mode == "max" else "minimize"
        # random start-up draws depend on the seed alone, not on what finished first
        startup = max(2, min(10, spec.explore.samples // 2))
        self._studies = {
            arm.id: optuna.create_study(
                direction=direction,
                sampler=optuna.samplers.TPESampler(
                    seed=sampler_seed + arm.index, n_startup_trials=startup
                ),
            )
            for arm in arms
        }
        self._ashas = {arm.id: self._make_asha(arm) for arm in arms}
        self.samples: dict[str, SampleRecord] = {}
        self._queue: list[tuple[SampleRecord, int]] = []
        self._asked = 0  # samples asked so far, over all arms (round robin)
        self._trial_sample: dict[str, tuple[str, int]] = {}  # Tune trial id -> (sample, seed)

    def _make_asha(self, arm: Arm) -> AsyncHyperBandScheduler | None:
        asha = self._spec.explore.asha
        if asha is None:
            return None
        max_t = max_epochs(self._spec, arm)
        return AsyncHyperBandScheduler(
            time_attr=TIME_ATTR,
            metric=ASHA_METRIC,
            mode=self._spec.metric.mode,
            max_t=max_t,
            grace_period=self._grace(max_t),
            reduction_factor=self._reduction(),
            stop_last_trials=False,
        )

    # --- Tune's Searcher interface ---------------------------------------------------------
    def suggest(self, trial_id: str) -> dict | None:
        if not self._queue and not self._ask_next_sample():
            return Searcher.FINISHED
        if not self._room():
            return None
        sample, seed = self._queue.pop(0)
        self._trial_sample[trial_id] = (sample.key, seed)
        arm = self._arms[self._arm_index(sample.arm)]
        return self._admitted(
            {
                TRIAL_CONFIG: trial_config(self._spec, arm, sample.params, seed),
                STUDY_TAGS: study_tags(EXPLORE, arm, sample.index, seed),
            }
        )

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        pass  # the scheduler records results through `decide`, before Tune tells us

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        if trial_id not in self._trial_sample:
            return
        key, seed = self._trial_sample[trial_id]
        sample = self.samples[key]
        if error:  # Tune says so only once no retry is left
            sample.outcome[seed] = "errored"
            sample.abandoned = True
        elif result and result.get("final"):
            sample.outcome[seed] = "completed"
            sample.final[seed] = float(result[self.metric])
        else:
            sample.outcome[seed] = "pruned"
        if len(sample.outcome) == len(sample.seeds) and not sample.told:
            self._tell(sample)

    # --- asking and telling Optuna ----------------------------------------------------------
    def _arm_index(self, arm_id: str) -> int:
        return next(a.index for a in self._arms if a.id == arm_id)

    def _ask_next_sample(self) -> bool:
        total = len(self._arms) * self._spec.explore.samples
        if self._asked >= total:
            return False
        arm = self._arms[self._asked % len(self._arms)]
        index = self._asked // len(self._arms)
        self._asked += 1
        trial = self._ask_new(arm)
        sample = SampleRecord(arm.id, index, dict(trial.params), trial.number, self._seeds)
        self.samples[sample.key] = sample
        if self._ashas[arm.id] is not None:
            self._ashas[arm.id].on_trial_add(None, _SampleHandle(sample.key))
        self._queue.extend((sample, seed) for seed in self._seeds)
        return True

    def _ask_new(self, arm: Arm) -> optuna.trial.Trial:
        """An Optuna sample this arm has not run yet: the same configuration on the same seeds
        would only repeat a trial. A repeat is told FAIL (TPE ignores it) and asked again; the
        study file guarantees a finite space holds enough distinct samples, and in a
        continuous one a repeat is all but impossible."""
        study = self._studies[arm.id]
        taken = [s.params for s in self.samples.values() if s.arm == arm.id]
        for _ in range(MAX_REPEATS):
            trial = study.ask(self._distributions)
            if trial.params not in taken:
                return trial
            study.tell(trial.number, state=TrialState.FAIL)
        free = [p for p in finite_points(self._distributions) if p not in taken]
        if free:
            study.enqueue_trial(free[0])  # the next ask returns it, under the same distributions
        return study.ask(self._distributions)

    def _tell(self, sample: SampleRecord) -> None:
        sample.told = True
        study = self._studies[sample.arm]
        outcomes = set(sample.outcome.values())
        if "errored" in outcomes:
            study.tell(sample.optuna_number, state=TrialState.FAIL)
        elif outcomes == {"completed"}:
            study.tell(sample.optuna_number, float(np.mean(list(sample.final.values()))))
        else:
            frozen = study.trials[sample.optuna_number]
            handle = optuna.trial.Trial(study, frozen._trial_id)
            for epoch_index, (_, mean) in enumerate(sample.rung_means):
                handle.report(mean, epoch_index)
            study.tell(sample.optuna_number, state=TrialState.PRUNED)

    # --- the sample book: what the scheduler asks ------------------------------------------
    def decide(self, study_tags_: dict[str, Any], result: dict) -> str:
        """Record one seed's evaluation; return the decision for its whole sample."""
        sample = self.samples.get(self.sample_key(study_tags_))
        final = bool(result.get("final"))
        if sample is None or self.metric not in result:
            return TrialScheduler.CONTINUE
        if sample.stopped_at is not None or sample.abandoned:
            return TrialScheduler.CONTINUE if final else TrialScheduler.STOP
        seed = int(study_tags_["seed"])
        index = int(result.get("evaluation", result["step"]))
        sample.reports.setdefault(seed, {})[index] = (
            float(result[TIME_ATTR]),
            float(result[self.metric]),
        )
        self._feed_complete_evaluations(sample)
        if sample.stopped_at is not None:
            return TrialScheduler.CONTINUE if final else TrialScheduler.STOP
        if self.waiting_at_last_rung(study_tags_):
            # even a final result waits: a seed restored past the rung (after --resume) must
            # not complete while its siblings may still be stopped there
            return TrialScheduler.PAUSE
        return TrialScheduler.CONTINUE

    def sample_key(self, study_tags_: dict[str, Any]) -> str:
        return f"{study_tags_['arm']}#{study_tags_['sample']}"

    def last_rung(self, arm: str) -> float | None:
        """The highest ASHA milestone below max_t: after it, a sample is never stopped."""
        if self._ashas.get(arm) is None:
            return None
        max_t = self._max_t(arm)
        below = [m for m in asha_milestones(self._grace(max_t), self._reduction(), max_t)
                 if m < max_t]  # fmt: skip
        return max(below) if below else None

    def _max_t(self, arm_id: str) -> float:
        return max_epochs(self._spec, self._arms[self._arm_index(arm_id)])

    def _grace(self, max_t: float) -> float:
        return min(self._spec.explore.asha.grace_period, max_t)

    def _reduction(self) -> float:
        return self._spec.explore.asha.reduction_factor

    def waiting_at_last_rung(self, study_tags_: dict[str, Any]) -> bool:
        """True for a seed that has reached its arm's last rung while a sibling has not, so
        the sample's last decision is still open."""
        sample = self.samples.get(self.sample_key(study_tags_))
        rung = self.last_rung(study_tags_["arm"]) if sample else None
        if rung is None or sample.stopped_at is not None or sample.abandoned:
            return False
        reached = {
            s
            for s, reports in sample.reports.items()
            if any(t >= rung for t, _ in reports.values())
        }
        return int(study_tags_["seed"]) in reached and reached != set(sample.seeds)

    def is_stopped(self, study_tags_: dict[str, Any]) -> bool:
        sample = self.samples.get(self.sample_key(study_tags_))
        return bool(sample and (sample.stopped_at is not None or sample.abandoned))

    def _feed_complete_evaluations(self, sample: SampleRecord) -> None:
        """Put every evaluation that all seeds have reached before the arm's ASHA, in order."""
        asha = self._ashas[sample.arm]
        common = set.intersection(*(set(sample.reports.get(s, {})) for s in sample.seeds))
        for index in sorted(common - set(sample.fed_steps)):
            sample.fed_steps.append(index)
            epoch = max(sample.reports[s][index][0] for s in sample.seeds)
            mean = float(np.mean([sample.reports[s][index][1] for s in sample.seeds]))
            sample.rung_means.append((epoch, mean))
            if asha is None or epoch >= self._max_t(sample.arm):
                continue  # the final evaluation is never a reason to stop
            decision = asha.on_trial_result(
                None, _SampleHandle(sample.key), {TIME_ATTR: epoch, ASHA_METRIC: mean}
            )
            if decision == TrialScheduler.STOP:
                sample.stopped_at = epoch
                log.info(
                    "ASHA (arm %s): stopping sample %d, all %d seeds, at epoch %.2f "
                    "(seed-mean %s %.4f)",
                    sample.arm,
                    sample.index,
                    len(sample.seeds),
                    epoch,
                    self.metric,
                    mean,
                )
                return

    def best_samples(self) -> dict[str, dict[str, Any]]:
        """Per arm, the params of the completed sample with the best seed-mean final metric."""
        candidates = [
            (sample.arm, list(sample.final.values()), sample.params)
            for sample in self.samples.values()
            if set(sample.outcome.values()) == {"completed"} and sample.final
        ]
        return {arm: params for arm, (_, params) in best_per_arm(candidates, self.mode).items()}


def asha_milestones(grace_period: float, reduction_factor: float, max_t: float) -> list[float]:
    """The epochs at which Ray's ASHA (one bracket) decides, computed as Ray does rather than
    read from its private state; tests/test_scheduling.py pins the two together, so a Ray
    upgrade that changes the rungs fails there, loudly."""
    count = int(math.log(max_t / grace_period) / math.log(reduction_factor) + 1)
    return sorted(grace_period * reduction_factor**k for k in range(max(count, 0)))


def best_per_arm(
    candidates: Iterable[tuple[str, list[float], dict[str, Any]]], mode: str
) -> dict[str, tuple[float, dict[str, Any]]]:
    """Per arm, (mean score, params) of the candidate whose seed-mean score is best; a NaN
    mean (a diverged seed) is never best."""
    sign = 1.0 if mode == "max" else -1.0
    best: dict[str, tuple[float, dict[str, Any]]] = {}
    for arm, scores, params in candidates:
        mean = float(np.mean(scores))
        if math.isnan(mean):
            continue
        if arm not in best or sign * mean > sign * best[arm][0]:
            best[arm] = (mean, params)
    return best


class LimitedFIFO(FIFOScheduler):
    """First in, first out, with at most `max_running` trials running or pending at once.

    Tune starts any pending trial that fits the resources without asking the scheduler, and
    its own `max_concurrent_trials` counts paused trials as live (a seed paused to wait for a
    sibling would then keep that sibling from ever starting). So the limit is a gate on the
    searcher: it creates a trial only while running + pending trials are below the limit,
    and this scheduler refreshes that count at every step.
    """

    def __init__(self, searcher: _SavedSearcher, max_running: int | None = None):
        super().__init__()
        self._metric, self._mode = searcher.metric, searcher.mode
        self._searcher = searcher
        searcher.max_running = max_running
        self.stopped_trials = 0

    @property
    def max_running(self) -> int | None:
        return self._searcher.max_running

    def _may_resume(self, trial) -> bool:
        return True

    def _tidy_paused(self, tune_controller, trials) -> None:
        """Hook: deal with paused trials that must not run again."""

    def choose_trial_to_run(self, tune_controller):
        trials = tune_controller.get_trials()
        self._tidy_paused(tune_controller, trials)
        running = sum(1 for t in trials if t.status == "RUNNING")
        pending = [t for t in trials if t.status == "PENDING"]
        self._searcher.active_trials = running + len(pending)
        # a paused seed that may go on first: finishing started samples tells Optuna sooner
        if self.max_running is None or running + len(pending) < self.max_running:
            for trial in trials:
                if trial.status == "PAUSED" and self._may_resume(trial):
                    return trial
        return pending[0] if pending else None

    def debug_string(self) -> str:
        limit = self.max_running or "any number of"
        return f"FIFO, at most {limit} trials at once; {self.stopped_trials} stopped early"


class ArmAwareASHA(LimitedFIFO):
    """Tune scheduler that prunes a sample's seeds together, comparing samples of one arm only.

    Trials run first-in first-out (seeds of a sample are suggested back to back, so they run
    side by side when concurrency allows); each result goes to the searcher's sample book,
    whose per-arm Ray ASHA decides for the whole sample.
    """

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        tags = trial.config.get("study")
        if not tags or tags.get("phase") != EXPLORE:
            return TrialScheduler.CONTINUE
        decision = self._searcher.decide(tags, result)
        if decision == TrialScheduler.STOP:
            self.stopped_trials += 1
            # the sample is now stopped: its seeds paused at the rung go with it at once
            self._tidy_paused(tune_controller, tune_controller.get_trials())
        return decision

    def _tidy_paused(self, tune_controller, trials) -> None:
        """A seed paused while its sample was stopped (a pause in flight, or an errored
        sibling) is stopped rather than resumed."""
        for trial in trials:
            tags = trial.config.get("study") or {}
            if trial.status == "PAUSED" and self._searcher.is_stopped(tags):
                self.stopped_trials += 1
                tune_controller.stop_trial(trial)

    def _may_resume(self, trial) -> bool:
        """A paused seed runs again only once its sample's last rung is decided."""
        return not self._searcher.waiting_at_last_rung(trial.config.get("study") or {})


class PlannedSearcher(_SavedSearcher):
    """Confirm phase: a fixed list of trials (chosen sample per arm x all seeds), FIFO."""

    def __init__(self, spec: StudySpec, configs: list[dict]):
        super().__init__(metric=spec.metric.name, mode=spec.metric.mode)
        self._configs = list(configs)
        self._next = 0

    def suggest(self, trial_id: str) -> dict | None:
        if self._next >= len(self._configs):
            return Searcher.FINISHED
        if not self._room():
            return None
        self._next += 1
        return self._admitted(self._configs[self._next - 1])

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        pass


def confirm_configs(
    spec: StudySpec,
    arms: list[Arm],
    chosen: dict[str, list[dict[str, Any]]],
    seeds: tuple[int, ...] | None = None,
    skip: frozenset[tuple[str, int]] = frozenset(),
) -> list[dict]:
    """Every chosen sample of every given arm on the given confirm seeds (all by default),
    crossed with the data seeds when the study has them; seed-major so that an interrupted
    confirm phase still has complete pairs across arms for the seeds it finished. `skip`
    holds (arm, seed) pairs whose explore trial is reused (reuse_explore_seeds)."""
    assert spec.confirm is not None
    configs = []
    for seed in spec.confirm.seeds if seeds is None else seeds:
        for data_seed in spec.confirm.data_seeds or (None,):
            for arm in arms:
                if (arm.id, seed) in skip:
                    continue
                for index, params in enumerate(chosen[arm.id]):
                    configs.append(
                        {
                            TRIAL_CONFIG: trial_config(spec, arm, params, seed, data_seed),
                            STUDY_TAGS: study_tags(CONFIRM, arm, index, seed, data_seed),
                        }
                    )
    return configs
