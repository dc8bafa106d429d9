"""Factors in `grid` and `fixed`: depths resolved against the model's layers (or kept symbolic),
and one-line errors for unknown factors, values out of the model's range and settings that are
one per study."""

from __future__ import annotations

import pytest

from study.spec import SpecError, load_study
from tests.study.spec.study_files import one_line_error_test, write

pytestmark = pytest.mark.usefixtures("offline")

BAD = [
    ("unknown factor", {"fixed.lrr": 1.0}, "fixed.lrr: unknown factor 'lrr' (did you mean 'lr'?)",
     "lrr: 1.0"),
    ("factor in two sections", {"fixed.lr": 1.0e-4},
     "fixed.lr: factor 'lr' is also set in search.lr (line", "lr: 0.0001"),
    ("seed is not a factor", {"fixed.seed": 3}, "fixed.seed: 'seed' is not a factor", "seed: 3"),
    ("depth above layers", {"grid.depth": ["full", 13]},
     "grid.depth[1]: 13 is not allowed: the model has 3 layers; use 1..3, 'full' or 'full-N'",
     "- 13"),
    ("depth 0", {"grid.depth": [0, "full"]}, "grid.depth[0]: 0 is not allowed", "- 0"),
    ("full-N below 1", {"grid.depth": ["full-3"]},
     "grid.depth[0]: 'full-3' is not allowed: it leaves 0 layers", "- full-3"),
    ("depth text", {"grid.depth": ["half"]}, "grid.depth[0]: 'half' is not allowed", "- half"),
    ("repeated arm value", {"grid.depth": [3, "full"]},
     "grid.depth[1]: 'full' is not allowed: it repeats grid.depth[0] (3)", "- full"),
    ("reinit_from above layers", {"grid.reinit_from": [0, 4]},
     "grid.reinit_from[1]: 4 is not allowed: the model has 3 layers; use 0..3", "- 4"),
    ("reinit_from negative", {"fixed.reinit_from": -1}, "fixed.reinit_from: -1 is not allowed",
     "reinit_from: -1"),
    ("freeze above layers", {"fixed.freeze": 5}, "fixed.freeze: 5 is not allowed", "freeze: 5"),
    ("reinit head out of range", {"fixed.reinit_heads": [[0, 1], [2, 4]]},
     "fixed.reinit_heads[1][1]: 4 is not allowed: the model has 4 heads; use 0..3", "- 4"),
    ("empty grid", {"grid": {}}, "grid: empty grid", "grid: {}"),
    ("empty grid values", {"grid.depth": []}, "grid.depth: empty grid", "depth: []"),
    ("grid value not a list", {"grid.depth": 3}, "grid.depth: 3 is not allowed: a list",
     "depth: 3"),
    ("data_seed in the grid", {"grid.data_seed": [0, 1]},
     "grid.data_seed: 'data_seed' is not a factor: set it with the top-level "
     "`phases.confirm.data_seeds`", "data_seed:"),
    ("precision in the grid", {"grid.precision": ["fp32", "bf16"]},
     "grid.precision: 'precision' is one per study: set it under fixed (a study never mixes "
     "precisions across its arms or trials)", "precision:"),
    ("precision searched", {"search.precision": {"type": "categorical", "choices": ["fp32"]}},
     "search.precision: 'precision' is one per study: set it under fixed", "precision:"),
    ("unknown precision", {"fixed.precision": "fp16"},
     "fixed.precision: 'fp16' is not allowed: expected one of ('auto', 'fp32', 'bf16')",
     "precision: fp16"),
    ("trial range", {"fixed.warmup_ratio": 1.5},
     "fixed.warmup_ratio: 1.5 is not allowed: expected in [0, 1)", "warmup_ratio: 1.5"),
    ("trial type", {"fixed.epochs": "three"},
     "fixed.epochs: 'three' is not allowed: epochs takes an integer", "epochs: three"),
    ("budget steps zero", {"fixed.budget": {"steps": 0}},
     "fixed.budget.steps: 0 is not allowed: an integer >= 1", "steps: 0"),
    ("budget steps not an integer", {"grid.budget": [{"steps": 100}, {"steps": 2.5}]},
     "grid.budget[1].steps: 2.5 is not allowed: an integer >= 1", "- steps: 2.5"),
    ("budget kind misspelt", {"fixed.budget": {"until_platau": {"patience": 1}}},
     "fixed.budget.until_platau: unknown budget kind 'until_platau' (did you mean "
     "'until_plateau'?)", "until_platau:"),
    ("budget patience negative", {"fixed.budget": {"until_plateau": {"patience": -1,
     "max_epochs": 3}}}, "fixed.budget.until_plateau.patience: -1 is not allowed", "patience: -1"),
    ("budget patience above max_epochs", {"fixed.budget": {"until_plateau": {"patience": 4,
     "max_epochs": 3}}}, "fixed.budget.until_plateau.patience: 4 is not allowed: dev is "
     "evaluated once per epoch, so patience may be at most max_epochs (3)", "patience: 4"),
    ("budget with two kinds", {"fixed.budget": {"steps": 5, "until_plateau": {}}},
     "fixed.budget: {'steps': 5, 'until_plateau': {}} is not allowed: one of", "budget:"),
    ("number quoted as text", {"fixed.lr": "0.001", "search": {}, "phases.explore": None,
     "phases.confirm.select": None}, "(0.001 is quoted, so YAML reads it as text", "lr: '0.001'"),
]  # fmt: skip


test_errors_name_file_line_field_value_and_allowed = one_line_error_test(BAD)


def test_a_budget_is_a_factor_and_patience_may_count_evaluations(tmp_path, study):
    """`patience` above `max_epochs` is allowed when `eval_every` evaluates more often."""
    plateau = {"until_plateau": {"patience": 4, "max_epochs": 3}}
    study["grid"]["budget"] = [{"steps": 100}, plateau]
    study["fixed"]["eval_every"] = 10
    write(tmp_path, study)
    loaded = load_study("study", folder=tmp_path)
    assert loaded.grid["budget"] == ({"steps": 100}, plateau)


def test_layer_counts_can_be_skipped(tmp_path, study):
    study["grid"]["depth"] = ["full", "full - 2", 9]
    write(tmp_path, study)
    loaded = load_study("study", folder=tmp_path, resolve_model_layers=False)
    assert loaded.model_layers == 0 and loaded.grid["depth"] == ("full", "full-2", 9)


def test_symbolic_depths_still_need_a_valid_form(tmp_path, study):
    study["grid"]["depth"] = ["full", "full-0"]
    write(tmp_path, study)
    with pytest.raises(SpecError, match=r"grid\.depth\[1\]: 'full-0' is not allowed"):
        load_study("study", folder=tmp_path, resolve_model_layers=False)
