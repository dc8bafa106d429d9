"""Each arm's explore samples in an Optuna storage, where Optuna's own tools can read them.

The explore searcher samples from one in-memory Optuna study per arm, pickled with Tune's
experiment so that `--resume` restores it exactly (study/search/explore.py). Optuna's tools
cannot see that copy, so each time Tune saves the searcher the samples are also written to an
RDB storage (by default `optuna.db` beside the MLflow store, see `default_storage`): one Optuna
study per arm and phase, named `<study>/<profile>-<time>/explore/<arm>`, one Optuna trial per
sample, with the seed-mean of the study metric at each evaluation as its intermediate values.
`optuna-dashboard sqlite:///optuna.db` and `optuna.load_study` then show each arm's trials and
learning curves.

Trials are matched to samples by the sample's index, so a resumed study updates what it wrote
before and adds nothing twice. A sample asked again after a restart with other values (the
driver died between this copy and Tune's own save) marks the stale trial FAIL with the user
attribute `superseded`. The copy never stops a study: a storage that fails is logged once.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState, create_trial

from study.folder_names import folder_problem
from study.search.optuna_internals import trial_id
from study.search.record import SampleRecord
from trainables.errors import UserInputError, first_line

log = logging.getLogger(__name__)

STORAGE_FILE = "optuna.db"
_written: dict[tuple[str, str, int], tuple] = {}  # what each trial holds, to skip rewrites


def default_storage(tracking_uri: str, results: str) -> str | None:
    """`optuna.db` beside a sqlite MLflow store, else inside a local results folder; None when
    both are remote (then give `--optuna-storage`)."""
    if tracking_uri.startswith("sqlite:///"):
        database = tracking_uri.removeprefix("sqlite:///")
        folder = database.rsplit("/", 1)[0] if "/" in database else "."
        return f"sqlite:///{folder}/{STORAGE_FILE}"
    if "://" not in results:
        return f"sqlite:///{results.rstrip('/')}/{STORAGE_FILE}"
    return None


def study_name(study_dir: str, phase: str, arm_id: str) -> str:
    """One Optuna study per arm and phase of one invocation (`--resume` keeps the name)."""
    return f"{study_dir}/{phase}/{arm_id}"


def write_arm(
    url: str,
    name: str,
    direction: str,
    samples: Iterable[SampleRecord],
    distributions: Mapping[str, BaseDistribution],
) -> None:
    """Bring the Optuna study `name` in line with one arm's samples (see the module). Only
    samples that changed since this process last wrote them are looked at: Tune saves the
    searcher after every evaluation of every trial."""
    changed = [s for s in samples if _written.get((url, name, s.index)) != _shown(s)]
    if not changed:
        return
    storage = _storage(url)
    study = optuna.create_study(
        storage=storage, study_name=name, direction=direction, load_if_exists=True
    )
    current = {
        t.user_attrs.get("sample"): t
        for t in study.get_trials(deepcopy=False)
        if not t.user_attrs.get("superseded")
    }
    for sample in sorted(changed, key=lambda s: s.index):
        trial = current.get(sample.index)
        if trial is not None and trial.params != sample.params:
            _supersede(storage, trial)
            trial = None
        if trial is None:
            study.add_trial(_new_trial(sample, distributions))
        elif trial.state == TrialState.RUNNING:
            _update(storage, trial, sample)
        _written[(url, name, sample.index)] = _shown(sample)


@functools.cache
def _storage(url: str) -> optuna.storages.RDBStorage:
    return optuna.storages.RDBStorage(url)


def _shown(sample: SampleRecord) -> tuple:
    """What the storage shows of a sample; it is written again only when this changes."""
    return (sample.told, len(sample.rung_means), tuple(sorted(sample.outcome.items())))


def _state(sample: SampleRecord) -> tuple[TrialState, float | None]:
    """As the searcher tells its in-memory study: COMPLETE with the seed mean, PRUNED, FAIL."""
    if not sample.told:
        return TrialState.RUNNING, None
    outcomes = set(sample.outcome.values())
    if "errored" in outcomes:
        return TrialState.FAIL, None
    if outcomes == {"completed"}:
        return TrialState.COMPLETE, float(np.mean(list(sample.final.values())))
    return TrialState.PRUNED, None


def _attrs(sample: SampleRecord) -> dict[str, Any]:
    return {
        "arm": sample.arm,
        "sample": sample.index,
        "seeds": list(sample.seeds),
        "seed_outcomes": {str(seed): what for seed, what in sorted(sample.outcome.items())},
        "seed_finals": {str(seed): value for seed, value in sorted(sample.final.items())},
        "evaluation_epochs": [epoch for epoch, _ in sample.rung_means],
    }


def _curve(sample: SampleRecord) -> dict[int, float]:
    """The sample's seed-mean at each evaluation every seed reached, by evaluation index."""
    return {index: mean for index, (_, mean) in enumerate(sample.rung_means)}


def _new_trial(sample: SampleRecord, distributions: Mapping[str, BaseDistribution]) -> FrozenTrial:
    state, value = _state(sample)
    return create_trial(
        state=state,
        value=value,
        params=dict(sample.params),
        distributions={name: distributions[name] for name in sample.params},
        user_attrs=_attrs(sample),
        intermediate_values=_curve(sample),
    )


def _update(storage: optuna.storages.BaseStorage, trial: FrozenTrial, sample: SampleRecord) -> None:
    for step, mean in _curve(sample).items():
        if trial.intermediate_values.get(step) != mean:
            storage.set_trial_intermediate_value(trial_id(trial), step, mean)
    for key, value in _attrs(sample).items():
        if trial.user_attrs.get(key) != value:
            storage.set_trial_user_attr(trial_id(trial), key, value)
    state, value = _state(sample)
    if state != TrialState.RUNNING:
        storage.set_trial_state_values(trial_id(trial), state, None if value is None else [value])


def _supersede(storage: optuna.storages.BaseStorage, trial: FrozenTrial) -> None:
    if trial.state == TrialState.RUNNING:
        storage.set_trial_user_attr(trial_id(trial), "superseded", True)
        storage.set_trial_state_values(trial_id(trial), TrialState.FAIL)


def check_storage(url: str) -> None:
    """Refuse a storage URL that cannot work before anything is written: not a database URL,
    or a sqlite file in a folder that does not exist. A server that stops answering later
    is only logged (see the module docstring)."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception as err:  # noqa: BLE001 - sqlalchemy's parse errors vary by version
        raise UserInputError(f"--optuna-storage {url}: not a database URL ({first_line(err)}); "
                             "give e.g. sqlite:///optuna.db or none") from None  # fmt: skip
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        folder = Path(parsed.database).expanduser().resolve().parent
        problem = folder_problem(folder)
        if problem:
            raise UserInputError(f"--optuna-storage {url}: the folder {folder} {problem}")
