"""Search distributions: each kind read from a study file gives the Optuna form, plan text,
points and largest value the searcher and the plan rely on, and survives the pickling that
Tune's saved experiments put it through, including a spec saved before the kinds were
classes."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import yaml
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from study.plan import arms, make_plan, max_epochs
from study.spec import (
    KINDS,
    Categorical,
    IntRange,
    LogUniform,
    SpecError,
    Uniform,
    finite_points,
    load_study,
)

SEARCH = {
    "lr": {"type": "loguniform", "low": 1.0e-5, "high": 3.0e-4},
    "warmup_ratio": {"type": "uniform", "low": 0.0, "high": 0.2},
    "epochs": {"type": "int", "low": 1, "high": 5, "step": 2},
    "batch_size": {"type": "categorical", "choices": [8, 32, 16]},
}


def study_file(folder: Path, model: Path, search: dict) -> Path:
    study = {
        "description": "Which learning rate and schedule suit each depth?",
        "model": str(model),
        "grid": {"depth": ["full", "full-1"]},
        "search": search,
        "seeds": 2,
        "phases": {"explore": {"samples": 3, "seeds": 1}},
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


@pytest.fixture
def searched(tmp_path, tiny_model):
    return load_study(str(study_file(tmp_path, tiny_model, SEARCH)), profile=None)


def test_each_kind_is_read_into_its_class(searched):
    assert searched.search == {
        "lr": LogUniform(1.0e-5, 3.0e-4),
        "warmup_ratio": Uniform(0.0, 0.2),
        "epochs": IntRange(1, 5, 2),
        "batch_size": Categorical((8, 32, 16)),
    }
    assert list(KINDS) == ["loguniform", "uniform", "int", "categorical"]


def test_optuna_forms(searched):
    forms = {name: dist.to_optuna() for name, dist in searched.search.items()}
    assert forms == {
        "lr": FloatDistribution(1.0e-5, 3.0e-4, log=True),
        "warmup_ratio": FloatDistribution(0.0, 0.2),
        "epochs": IntDistribution(1, 5, step=2),
        "batch_size": CategoricalDistribution([8, 32, 16]),
    }


def test_plan_text_and_largest_epochs(searched):
    lines = make_plan(searched).describe().splitlines()
    assert [line for line in lines if "searched per arm" in line] == [
        "  searched per arm: lr ~ loguniform[1e-05, 0.0003], warmup_ratio ~ uniform[0, 0.2], "
        "epochs ~ int[1, 5], batch_size ~ categorical[8, 32, 16]"
    ]
    assert {max_epochs(searched, arm) for arm in arms(searched)} == {5.0}
    assert searched.search["batch_size"].largest() == 32


def test_finite_points_are_what_optuna_can_draw(searched):
    finite = {k: searched.search[k] for k in ("epochs", "batch_size")}
    assert finite_points(finite) == [
        {"epochs": epochs, "batch_size": size} for epochs in (1, 3, 5) for size in (8, 32, 16)
    ]
    assert finite_points(searched.search) == []  # a real-valued factor: no finite list


def test_explore_samples_are_capped_by_the_finite_points(tmp_path, tiny_model):
    finite = {"epochs": SEARCH["epochs"], "batch_size": {"type": "categorical", "choices": [8]}}
    path = study_file(tmp_path, tiny_model, finite)  # 3 x 1 points, 3 samples: allowed
    assert load_study(str(path), profile=None).explore.samples == 3
    finite["batch_size"]["choices"] = [8, 16]  # 6 points
    finite["epochs"] = {"type": "int", "low": 1, "high": 1_000_000_000}  # counted, not listed
    assert load_study(str(study_file(tmp_path, tiny_model, finite)), profile=None).explore
    path = study_file(tmp_path, tiny_model, {"epochs": {"type": "int", "low": 1, "high": 2}})
    with pytest.raises(SpecError, match=r"phases\.explore\.samples: 3 is not allowed: at most 2"):
        load_study(str(path), profile=None)


def test_specs_pickle_and_hash(searched):
    again = pickle.loads(pickle.dumps(searched))
    assert again == searched
    assert again.search["lr"].describe() == "loguniform[1e-05, 0.0003]"
    assert len({*searched.search.values(), *again.search.values()}) == 4
