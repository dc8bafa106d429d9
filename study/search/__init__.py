"""Search and pruning that respect arms and seeds, as Ray Tune searchers and schedulers.

- `explore`: `ArmSearcher`, per-arm seeded Optuna samples run once per seed, and the sample
  book through which Ray's ASHA prunes a sample's seeds together, inside one arm;
- `confirm`: which sample each arm confirms (`choose_samples`, `best_per_arm`), the confirm
  trials (`confirm_configs`) and `PlannedSearcher`, which runs them in order;
- `schedulers`: `LimitedFIFO` and `ArmAwareASHA`, which ask the searcher and gate concurrency;
- `record`: `SampleRecord`, one sample's seeds, reports and rungs;
- `saved`: the searchers' base, whose state Tune saves with the experiment;
- `tune_internals`: every reliance on Ray beyond its public API, pinned by
  tests/study/search/test_ray_contract.py.
"""

from __future__ import annotations

from study.search.confirm import (
    PlannedSearcher,
    best_per_arm,
    choose_samples,
    completed_explore_trials,
    confirm_configs,
)
from study.search.explore import ArmSearcher
from study.search.record import SampleRecord
from study.search.schedulers import ArmAwareASHA, LimitedFIFO
from study.search.tune_internals import asha_milestones

__all__ = [
    "ArmAwareASHA", "ArmSearcher", "LimitedFIFO", "PlannedSearcher",
    "SampleRecord", "asha_milestones", "best_per_arm", "choose_samples",
    "completed_explore_trials", "confirm_configs",
]  # fmt: skip
