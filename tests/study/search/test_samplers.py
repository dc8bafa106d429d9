"""The explore phase's Optuna sampler (`phases.explore.sampler`, study/spec/samplers.py): each
one the study file may name draws seeded samples from a real search space, past its random
start-up draws, and the explore searcher uses the one the study names (TPE by default)."""

from __future__ import annotations

import math

import optuna
import pytest

from study.names import DRAWN_BY, STUDY_TAGS
from study.plan import make_plan
from study.search import ArmSearcher
from study.spec import (
    DEFAULT_SAMPLER,
    RANDOM_DRAW,
    SAMPLERS,
    load_study,
    make_sampler,
    next_drawer,
)
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


@pytest.mark.parametrize("name", ["tpe", "gp"])
def test_who_draws_next_agrees_with_optuna(name):
    """A model sampler asked before `startup` samples it counts have ended draws the random
    sampler's very sample; once they have, its model's. TPE counts a pruned sample, GP not."""
    space = {"lr": SPACE["lr"]}
    model = optuna.create_study(direction="maximize", sampler=make_sampler(name, 5, 2))
    plain = optuna.create_study(sampler=make_sampler("random", 5, 2))

    def ask() -> tuple[str, optuna.trial.Trial, float]:
        drawer = next_drawer(name, model, 2)
        trial = model.ask(space)
        return drawer, trial, plain.ask(space).params["lr"]

    first, second = ask(), ask()
    model.tell(first[1], 0.1)  # the second still running: one sample has ended
    third = ask()
    model.tell(second[1], state=optuna.trial.TrialState.PRUNED)
    fourth = ask()
    for drawer, trial, random_lr in (first, second, third):
        assert drawer == RANDOM_DRAW and trial.params["lr"] == random_lr
    drawer, trial, random_lr = fourth
    if name == "tpe":  # a completed and a pruned sample: its model draws
        assert drawer == "tpe" and trial.params["lr"] != random_lr
    else:  # GP counts the completed one only
        assert drawer == RANDOM_DRAW and trial.params["lr"] == random_lr
    model.tell(third[1], 0.2)
    assert next_drawer(name, model, 2) == name
    assert next_drawer("random", model, 2) == RANDOM_DRAW


def test_the_explore_searcher_tags_who_drew_each_sample(tmp_path, tiny_model, tiny_corpus):
    """Samples asked before two of the arm's samples ended are random draws, after that TPE's,
    and every seed's trial carries its sample's drawer (a param of its run)."""
    phases = {"explore": {"samples": 3, "seeds": 2}}
    path = write_study(tmp_path, str(tiny_model), tiny_corpus, search=LOG_LR, phases=phases)
    spec = load_study(str(path), "default")
    arms = make_plan(spec).arms
    searcher = ArmSearcher(spec, arms[:1])
    configs = {}
    for n in range(4):  # samples 0 and 1 of the one arm, two seeds each
        configs[f"t{n}"] = searcher.suggest(f"t{n}")
    for n in range(4):
        searcher.on_trial_complete(f"t{n}", {"final": True, spec.metric.name: 0.1 * n})
    configs["t4"] = searcher.suggest("t4")
    drawn = [c[STUDY_TAGS][DRAWN_BY] for c in configs.values()]
    assert drawn == [RANDOM_DRAW] * 4 + ["tpe"]
