"""The confirm phase's choices: which sample each arm runs, on which seeds, in what order.

Selection works on plain records of the explore trials (`TrialResult`), which the driver reads
from the tracking store (study/tracking/reading.py, the reader the report uses too), so the
rule that picks a sample is kept apart from where the results are stored and can be checked
without Ray or MLflow.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np
from ray.tune.search import Searcher

from study.names import CHECKPOINT_EVERY_S, CONFIRM, STUDY_TAGS, TRIAL_CONFIG
from study.plan import Arm, checkpoint_every_s, study_tags, trial_config
from study.search._peak_model import fit_peaks
from study.search.saved import SavedSearcher
from study.spec import StudySpec
from study.tracking.reading import TrialResult
from trainables.errors import UserInputError

log = logging.getLogger(__name__)

BEST, MODEL = "best", "model"  # confirm.select's rules (study/spec/phases.py checks them)


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


def choose_samples(
    spec: StudySpec, arms: list[Arm], explore: Iterable[TrialResult]
) -> dict[str, list[dict[str, Any]]]:
    """The samples each arm runs in the confirm phase: a fixed list, or the explore sample
    whose seeds all completed with the best mean metric (NaN where a seed's is missing)."""
    if spec.confirm.select not in (BEST, MODEL):
        return {arm.id: [dict(s) for s in spec.confirm.select] for arm in arms}
    by_sample: dict[tuple[str, int], list[TrialResult]] = defaultdict(list)
    for trial in explore:
        by_sample[(trial.tags["arm"], trial.tags["sample"])].append(trial)
    candidates = []
    for (arm, _), trials in by_sample.items():
        if len(trials) < len(spec.explore.seeds) or not all(t.finished for t in trials):
            continue
        params = {k: trials[0].settings[k] for k in spec.search}
        scores = [t.metrics.get(spec.metric.name, math.nan) for t in trials]
        candidates.append((arm, scores, params))
    best = best_per_arm(candidates, spec.metric.mode)
    missing = [arm.id for arm in arms if arm.id not in best]
    if missing:
        raise UserInputError(
            f"explore finished without a sample whose seeds all completed for arm(s) "
            f"{missing}; see the errored trials in MLflow, or give confirm.select a fixed list"
        )
    if spec.confirm.select == MODEL:
        return _modelled(spec, explore, best)
    for arm, (score, params) in best.items():
        log.info("confirm: arm %s runs %s (explore mean %s %.4f)", arm, params,
                 spec.metric.name, score)  # fmt: skip
    return {arm: [params] for arm, (_, params) in best.items()}


def _modelled(
    spec: StudySpec, explore: Iterable[TrialResult], best: dict[str, tuple[float, dict]]
) -> dict[str, list[dict[str, Any]]]:
    """`select: model`: each arm's value of the one searched factor at the peak of a curve
    fitted through every finished explore trial (study/search/_peak_model.py)."""
    (name, dist), = spec.search.items()  # fmt: skip  # the spec allows model with one factor
    points = [
        (t.tags["arm"], float(t.settings[name]), t.metrics[spec.metric.name])
        for t in explore
        if t.finished and math.isfinite(t.metrics.get(spec.metric.name, math.nan))
    ]
    fallback = {arm: float(params[name]) for arm, (_, params) in best.items()}
    fit = fit_peaks(points, float(dist.low), float(dist.high), spec.metric.mode, fallback)
    for arm, value in fit.chosen.items():
        how = (f"the peak of the fitted curve (shared curvature {fit.curvature:.3g})"
               if fit.from_curve[arm] else
               "its best explore sample: the fitted curve has no peak")  # fmt: skip
        log.info("confirm: arm %s runs %s=%.4g, %s, over %d explore trials", arm, name, value,
                 how, len(points))  # fmt: skip
    return {arm: [{name: value}] for arm, value in fit.chosen.items()}


def completed_explore_trials(
    spec: StudySpec, chosen: dict[str, list[dict[str, Any]]], explore: Iterable[TrialResult]
) -> list[tuple[str, int, int]]:
    """(arm, sample, seed) of explore trials that ran a chosen sample on a confirm seed to
    their end: with reuse_explore_seeds they stand in for the confirm trial."""
    confirm_seeds = set(spec.confirm.seeds)
    found = []
    for trial in explore:
        tags = trial.tags
        if not trial.finished or tags["seed"] not in confirm_seeds:
            continue
        if {k: trial.settings[k] for k in spec.search} in chosen[tags["arm"]]:
            found.append((tags["arm"], int(tags["sample"]), int(tags["seed"])))
    return sorted(found)


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
                            CHECKPOINT_EVERY_S: checkpoint_every_s(spec, CONFIRM),
                        }
                    )
    return configs


class PlannedSearcher(SavedSearcher):
    """Confirm phase: a fixed list of trials (chosen sample per arm x all seeds), FIFO. Its
    attribute names are part of every confirm experiment's saved state."""

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
        self._released()
