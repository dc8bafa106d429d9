"""The explore phase's Optuna sampler (`phases.explore.sampler`, study/spec/samplers.py): each
one the study file may name draws seeded samples from a real search space, past its random
start-up draws, and the explore searcher uses the one the study names (TPE by default)."""

from __future__ import annotations

import math

import optuna
import pytest

from study.plan import make_plan
from study.search import ArmSearcher
from study.spec import DEFAULT_SAMPLER, SAMPLERS, load_study, make_sampler
from tests.study_helpers import write_study

SPACE = {
    "lr": optuna.distributions.FloatDistribution(1e-5, 1e-2, log=True),
    "dropout": optuna.distributions.FloatDistribution(0.0, 0.3),
}
CLASSES = {"tpe": "TPESampler", "random": "RandomSampler", "gp": "GPSampler"}


def _draws(name: str, seed: int, n: int = 6) -> list[dict]:
    """n samples of a study told a smooth objective, as the searcher asks and tells them."""
    study = optuna.create_study(direction="maximize", sampler=make_sampler(name, seed, 2))
    out = []
    for _ in range(n):
        trial = study.ask(SPACE)
        study.tell(trial, -((math.log10(trial.params["lr"]) + 3.5) ** 2) - trial.params["dropout"])
        out.append(dict(trial.params))
    return out


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_each_sampler_draws_seeded_samples_past_its_start_up(name):
    first = _draws(name, seed=3)
    assert first == _draws(name, seed=3)  # the arm's seed fixes its samples
    assert first != _draws(name, seed=4)
    assert all(SPACE["lr"].low <= d["lr"] <= SPACE["lr"].high for d in first)


@pytest.mark.parametrize("name", [None, *SAMPLERS])
def test_the_explore_searcher_uses_the_sampler_the_study_names(name, tmp_path, tiny_model,
                                                               tiny_corpus):  # fmt: skip
    path = write_study(tmp_path, str(tiny_model), tiny_corpus)
    if name is not None:
        text = path.read_text().replace(
            "    samples: 2\n", f"    samples: 2\n    sampler: {name}\n"
        )
        path.write_text(text)
    spec = load_study(str(path), "default")
    assert spec.explore.sampler == (name or DEFAULT_SAMPLER)
    searcher = ArmSearcher(spec, make_plan(spec).arms)
    kinds = {type(s.sampler).__name__ for s in searcher._studies.values()}
    assert kinds == {CLASSES[name or DEFAULT_SAMPLER]}


LOG_LR = {"lr": {"type": "loguniform", "low": 1.0e-6, "high": 3.0e-3}}


def _first_draws(folder, model, corpus, **explore) -> list[dict]:
    """The explore searcher's first sample in each arm of a study whose explore has `explore`."""
    phases = {"explore": {"samples": 2, "seeds": 2, **explore}}
    path = write_study(folder, model, corpus, search=LOG_LR, phases=phases)
    spec = load_study(str(path), "default")
    searcher = ArmSearcher(spec, make_plan(spec).arms)
    return [study.ask(searcher._distributions).params for study in searcher._studies.values()]


def test_sampler_seed_draws_other_samples_and_its_default_keeps_the_old_ones(
    tmp_path, tiny_model, tiny_corpus
):
    """`sampler_seed` 0 (the default) draws what every study drew before the key existed, arm
    i's sampler seeded with i; another value is an independent repetition of the search."""
    study = (tmp_path, str(tiny_model), tiny_corpus)
    unset = _first_draws(*study)
    space = {"lr": optuna.distributions.FloatDistribution(1e-6, 3e-3, log=True)}
    seeded_by_arm = [
        optuna.create_study(sampler=make_sampler(DEFAULT_SAMPLER, i, 2)).ask(space).params
        for i in range(2)
    ]
    assert unset == seeded_by_arm == _first_draws(*study, sampler_seed=0)
    assert _first_draws(*study, sampler_seed=7) != unset
