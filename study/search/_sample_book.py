"""The explore phase's sample book: each seed's dev metric at each evaluation, and the per-arm
Ray ASHA that judges a sample by its seeds' mean.

Kept apart from `ArmSearcher` (`study.search.explore`), which asks and tells Optuna, as Ray
keeps its `_Bracket` apart from `AsyncHyperBandScheduler`: the book alone decides when a
sample's seed mean goes before its arm's ASHA, and what that means for each seed.

- When every seed of a sample has reported an evaluation, their mean is fed to that arm's own
  ASHA as if the sample were one trial (through `study.search.tune_internals`); the decision
  applies to all seeds of the sample together.
- A seed that reaches its arm's last rung before its siblings is paused until they get there,
  so no seed can finish while the rest of its sample is still to be judged (seeds would
  otherwise split: one completed, the others pruned a moment later). A sibling that ended
  before the rung (a `budget: {until_plateau}` trial that stopped improving) will never get
  there and is not waited for (siblings still training are), and the sample is judged no
  further. (Waiting for it left the seed paused for good and the study hung when nothing
  else was left to run.)

The book is pickled with the searcher in every experiment's state: its attribute names are
part of the saved layout (`LAYOUT_VERSION` in study/execution/state.py).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from ray.tune.schedulers import TrialScheduler

from study.plan import Arm, max_epochs
from study.search.record import SampleRecord
from study.search.tune_internals import (
    TIME_ATTR,
    asha_milestones,
    asha_stops,
    enter_sample,
    new_asha,
)
from study.spec import StudySpec

log = logging.getLogger(__name__)


def sample_key(study_tags: dict[str, Any]) -> str:
    """The book's key of the sample a trial belongs to (its `SampleRecord.key`)."""
    return f"{study_tags['arm']}#{study_tags['sample']}"


class _SampleBook:
    """Every explore sample, its seeds' reports and rungs, and one ASHA per arm (None without
    `explore.asha`)."""

    def __init__(self, spec: StudySpec, arms: list[Arm], metric: str):
        assert spec.explore is not None
        self._spec = spec
        self._arms = {arm.id: arm for arm in arms}
        self._metric = metric
        self.samples: dict[str, SampleRecord] = {}
        self._ashas = {arm.id: self._make_asha(arm) for arm in arms}

    def _make_asha(self, arm: Arm):
        if self._spec.explore.asha is None:
            return None
        max_t = max_epochs(self._spec, arm)
        return new_asha(self._spec.metric.mode, max_t, self._grace(max_t), self._reduction())

    def add(self, sample: SampleRecord) -> None:
        """Open a new sample: its arm's ASHA starts tracking it as one trial."""
        self.samples[sample.key] = sample
        if self._ashas[sample.arm] is not None:
            enter_sample(self._ashas[sample.arm], sample.key)

    def decide(self, study_tags: dict[str, Any], result: dict) -> str:
        """Record one seed's evaluation; return the decision for its whole sample."""
        sample = self.samples.get(sample_key(study_tags))
        final = bool(result.get("final"))
        if sample is None or self._metric not in result:
            return TrialScheduler.CONTINUE
        if sample.closed:
            return TrialScheduler.CONTINUE if final else TrialScheduler.STOP
        seed = int(study_tags["seed"])
        index = int(result.get("evaluation", result["step"]))
        sample.reports.setdefault(seed, {})[index] = (
            float(result[TIME_ATTR]),
            float(result[self._metric]),
        )
        self._feed_complete_evaluations(sample)
        if sample.stopped_at is not None:
            return TrialScheduler.CONTINUE if final else TrialScheduler.STOP
        if self.waiting_at_last_rung(study_tags):
            # even a final result waits: a seed restored past the rung (after --resume) must
            # not complete while its siblings may still be stopped there
            return TrialScheduler.PAUSE
        return TrialScheduler.CONTINUE

    def last_rung(self, arm: str) -> float | None:
        """The highest ASHA milestone below max_t: after it, a sample is never stopped."""
        if self._ashas.get(arm) is None:
            return None
        max_t = self._max_t(arm)
        below = [m for m in asha_milestones(self._grace(max_t), self._reduction(), max_t)
                 if m < max_t]  # fmt: skip
        return max(below) if below else None

    def waiting_at_last_rung(self, study_tags: dict[str, Any]) -> bool:
        """True for a seed that has reached its arm's last rung while a sibling still
        training has not, so the sample's last decision is still open."""
        sample = self.samples.get(sample_key(study_tags))
        rung = self.last_rung(study_tags["arm"]) if sample else None
        if rung is None or sample.closed:
            return False
        reached = {
            s
            for s, reports in sample.reports.items()
            if any(t >= rung for t, _ in reports.values())
        }
        ended = set(sample.outcome)  # reports no more (the searcher records each seed's end)
        return int(study_tags["seed"]) in reached and not set(sample.seeds) <= reached | ended

    def is_stopped(self, study_tags: dict[str, Any]) -> bool:
        sample = self.samples.get(sample_key(study_tags))
        return bool(sample and sample.closed)

    def _max_t(self, arm_id: str) -> float:
        return max_epochs(self._spec, self._arms[arm_id])

    def _grace(self, max_t: float) -> float:
        return min(self._spec.explore.asha.grace_period, max_t)

    def _reduction(self) -> float:
        return self._spec.explore.asha.reduction_factor

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
            if asha_stops(asha, sample.key, epoch, mean):
                sample.stopped_at = epoch
                log.info(
                    "ASHA (arm %s): stopping sample %d, all %d seeds, at epoch %.2f "
                    "(seed-mean %s %.4f)",
                    sample.arm,
                    sample.index,
                    len(sample.seeds),
                    epoch,
                    self._metric,
                    mean,
                )
                return
