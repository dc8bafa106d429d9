"""The Optuna samplers an explore phase may draw its samples with (`phases.explore.sampler`),
each made seeded per arm; TPE unless the study says otherwise.

CMA-ES is not offered: Optuna's CmaEsSampler needs the `cmaes` package, which the project
does not install. GP (Optuna's GPSampler) runs on torch and scipy, both installed.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from study.spec.document import Doc, FieldPath, show, suggest

if TYPE_CHECKING:  # optuna costs half a second: imported when a sampler is made, not to read a
    import optuna  # study file (the commands' --help lists the studies)


def _samplers() -> ModuleType:
    import optuna.samplers

    return optuna.samplers


DEFAULT_SAMPLER = "tpe"
# name -> the sampler, from its seed and its count of random start-up draws
SAMPLERS: dict[str, Callable[[int, int], optuna.samplers.BaseSampler]] = {
    "tpe": lambda seed, startup: _samplers().TPESampler(seed=seed, n_startup_trials=startup),
    "random": lambda seed, startup: _samplers().RandomSampler(seed=seed),
    "gp": lambda seed, startup: _samplers().GPSampler(seed=seed, n_startup_trials=startup),
}
# sampler -> the states of the Optuna trials its model counts: until `startup` of them have
# ended, it draws at random (Optuna's TPESampler counts pruned trials, its GPSampler does not)
# (optuna.trial.TrialState names)
MODEL_STATES: dict[str, tuple[str, ...]] = {
    "tpe": ("COMPLETE", "PRUNED"),
    "gp": ("COMPLETE",),
}
RANDOM_DRAW = "random"
START_FROM = "start_from"  # drawn_by of a sample the study file gave (explore.start_from)


def make_sampler(name: str, seed: int, startup: int) -> optuna.samplers.BaseSampler:
    """The named sampler, seeded; `startup` random draws first where it takes them."""
    return SAMPLERS[name](seed, startup)


def next_drawer(name: str, study: optuna.Study, startup: int) -> str:
    """Who draws the next sample of `study`: the sampler's model (its name) once `startup`
    samples it counts have ended, else a random draw, as Optuna's samplers decide it. A study
    whose samples are asked before earlier ones end may never reach the model: the report
    says how each sample was drawn."""
    from optuna.trial import TrialState

    names = MODEL_STATES.get(name)
    if names is None:
        return RANDOM_DRAW
    states = tuple(TrialState[state] for state in names)
    if len(study.get_trials(deepcopy=False, states=states)) < startup:
        return RANDOM_DRAW
    return name


def check_sampler(doc: Doc, path: FieldPath, value: Any) -> str:
    """The explore phase's sampler name, the default where none is given."""
    if value is None:
        return DEFAULT_SAMPLER
    if not isinstance(value, str) or value not in SAMPLERS:
        hint = suggest(value, tuple(SAMPLERS)) if isinstance(value, str) else ""
        raise doc.fail(path, f"{show(value)} is not an Optuna sampler here{hint}; one of "
                       f"{', '.join(SAMPLERS)} (default {DEFAULT_SAMPLER})")  # fmt: skip
    return value
