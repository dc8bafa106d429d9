"""The explore phase's searcher: per-arm Optuna samples, each run on every explore seed, and
the *sample book* that lets Ray's ASHA judge a sample by its seeds' mean.

Why not Ray's stock OptunaSearch + ASHAScheduler: they treat every trial as an independent
point, so ASHA would compare a depth-11 trial with a depth-12 trial (arms converge at
different speeds, and that speed is what the study measures) and could stop seed 3 of a
sample while keeping seed 1 (the comparison would then be decided by pruning seeds). Here:

- `ArmSearcher` keeps one seeded Optuna study per arm, asks it for a sample through the
  ask/tell interface, and emits that sample once per seed, seeds of a sample back to back.
- Its sample book (`study.search._sample_book`) keeps each seed's dev metric at each
  evaluation and puts a sample's seed mean before that arm's own Ray ASHA; the decision
  applies to all seeds of the sample together. The searcher answers the scheduler from it.
- The book lives in the searcher, not in the scheduler (`study.search.schedulers`), because
  Tune checkpoints searcher state with the experiment and does not checkpoint scheduler
  state, so a resumed study keeps its rungs and its Optuna history.
- Optuna is told each sample's mean final value when all its seeds completed, or PRUNED with
  the last rung mean it reached, or FAIL if a seed errored; never a truncated value as final.

The attributes of `ArmSearcher` and of its book are part of the saved state of every
experiment: changing them means raising `LAYOUT_VERSION` (study/execution/state.py), so
that a study saved by older code is refused on `--resume` instead of restored wrongly.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState
from ray.tune.search import Searcher

from study.names import CHECKPOINT_EVERY_S, EXPLORE, STUDY_TAGS, TRIAL_CONFIG
from study.plan import Arm, checkpoint_every_s, study_tags, trial_config
from study.search._sample_book import _SampleBook
from study.search.confirm import best_per_arm
from study.search.optuna_internals import live_trial
from study.search.optuna_storage import study_name, write_arm
from study.search.record import SampleRecord
from study.search.saved import SavedSearcher
from study.spec import START_FROM, StudySpec, finite_points, make_sampler, next_drawer
from trainables.errors import first_line

log = logging.getLogger(__name__)
optuna.logging.set_verbosity(optuna.logging.WARNING)

MAX_REPEATS = 50  # Optuna asks before an unused point of a finite space is taken in order
_storage_failed = False  # the Optuna storage failed once in this process: said already


class ArmSearcher(SavedSearcher):
    """Explore phase: per-arm seeded Optuna samples (TPE unless the study's `sampler` says
    otherwise; arm i's sampler seeded with the study's `sampler_seed` + i), each run once per
    seed; owns the sample book.

    With `optuna_storage` (an RDB URL) and `optuna_prefix`, each arm's samples are also
    written there whenever Tune saves the searcher (`study.search.optuna_storage`)."""

    def __init__(
        self,
        spec: StudySpec,
        arms: list[Arm],
        *,
        optuna_storage: str | None = None,
        optuna_prefix: str = "",
    ):
        super().__init__(metric=spec.metric.name, mode=spec.metric.mode)
        assert spec.explore is not None
        self._spec = spec
        self._arms = arms
        self._seeds = tuple(spec.explore.seeds)
        self._distributions = {k: d.to_optuna() for k, d in spec.search.items()}
        direction = "maximize" if spec.metric.mode == "max" else "minimize"
        # random start-up draws depend on the seed alone, not on what finished first
        startup = max(2, min(10, spec.explore.samples // 2))
        seed = spec.explore.sampler_seed  # 0 unless the study repeats a search on purpose
        self._startup = startup
        self._studies = {
            arm.id: optuna.create_study(
                direction=direction,
                sampler=make_sampler(spec.explore.sampler, seed + arm.index, startup),
            )
            for arm in arms
        }
        for study in self._studies.values():  # known good values first (enqueue_trial)
            for sample in spec.explore.start_from:
                study.enqueue_trial(dict(sample), skip_if_exists=True)
        self._book = _SampleBook(spec, arms, spec.metric.name)
        self._queue: list[tuple[SampleRecord, int]] = []
        self._asked = 0  # samples asked so far, over all arms (round robin)
        self._trial_sample: dict[str, tuple[str, int]] = {}  # Tune trial id -> (sample, seed)
        self._optuna_url = optuna_storage
        self._optuna_names = {a.id: study_name(optuna_prefix, EXPLORE, a.id) for a in arms}

    # --- Tune's Searcher interface ---------------------------------------------------------
    def save(self, checkpoint_path: str) -> None:
        super().save(checkpoint_path)
        self._write_optuna_storage()

    def _write_optuna_storage(self) -> None:
        """The state just saved, copied to the Optuna storage; a failure there is logged once
        and never stops the study."""
        global _storage_failed
        if not self._optuna_url:
            return
        direction = "maximize" if self.mode == "max" else "minimize"
        try:
            for arm in self._arms:
                samples = [s for s in self.samples.values() if s.arm == arm.id]
                name = self._optuna_names[arm.id]
                write_arm(self._optuna_url, name, direction, samples, self._distributions)
        except Exception as err:  # noqa: BLE001 - the study matters more than its copy
            if not _storage_failed:
                log.warning("could not write the Optuna storage %s: %s", self._optuna_url,
                            first_line(err, 300))  # fmt: skip
            _storage_failed = True

    def suggest(self, trial_id: str) -> dict | None:
        if not self._room():  # before asking Optuna: a sample is drawn only for a free slot
            return None
        if not self._queue and not self._ask_next_sample():
            return Searcher.FINISHED
        sample, seed = self._queue.pop(0)
        self._trial_sample[trial_id] = (sample.key, seed)
        arm = self._arms[self._arm_index(sample.arm)]
        drawn_by = sample.drawn_by or None  # a sample asked by older code, before a resume: unknown
        return self._admitted(
            {
                TRIAL_CONFIG: trial_config(self._spec, arm, sample.params, seed),
                STUDY_TAGS: study_tags(EXPLORE, arm, sample.index, seed, drawn_by=drawn_by),
                CHECKPOINT_EVERY_S: checkpoint_every_s(self._spec, EXPLORE),
            }
        )

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        pass  # the scheduler records results through `decide`, before Tune tells us

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        self._released()
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
        study = self._studies[arm.id]
        queued = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
        drawn_by = START_FROM if queued else next_drawer(self._spec.explore.sampler, study,
                                                         self._startup)  # fmt: skip
        trial = self._ask_new(arm)
        sample = SampleRecord(arm.id, index, dict(trial.params), trial.number, self._seeds,
                              drawn_by=drawn_by)  # fmt: skip
        self._book.add(sample)
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
        free = [p for p in finite_points(self._spec.search) if p not in taken]
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
            handle = live_trial(study, frozen)
            for epoch_index, (_, mean) in enumerate(sample.rung_means):
                handle.report(mean, epoch_index)
            study.tell(sample.optuna_number, state=TrialState.PRUNED)

    # --- the sample book: what the scheduler asks ------------------------------------------
    @property
    def samples(self) -> dict[str, SampleRecord]:
        return self._book.samples

    def decide(self, study_tags_: dict[str, Any], result: dict) -> str:
        """Record one seed's evaluation; return the decision for its whole sample."""
        return self._book.decide(study_tags_, result)

    def last_rung(self, arm: str) -> float | None:
        return self._book.last_rung(arm)

    def waiting_at_last_rung(self, study_tags_: dict[str, Any]) -> bool:
        return self._book.waiting_at_last_rung(study_tags_)

    def is_stopped(self, study_tags_: dict[str, Any]) -> bool:
        return self._book.is_stopped(study_tags_)

    def best_samples(self) -> dict[str, dict[str, Any]]:
        """Per arm, the params of the completed sample with the best seed-mean final metric."""
        candidates = [
            (sample.arm, list(sample.final.values()), sample.params)
            for sample in self.samples.values()
            if set(sample.outcome.values()) == {"completed"} and sample.final
        ]
        return {arm: params for arm, (_, params) in best_per_arm(candidates, self.mode).items()}
