"""Phases and seeds: explore and confirm read with their seeds (held out, in rounds, or reused),
and one-line errors for phases that cannot run and seeds that clash."""

from __future__ import annotations

import pytest

from study.plan import make_plan
from study.spec import ConfirmPhase, load_study
from tests.study.spec.study_files import drop, one_line_error_test, write

pytestmark = pytest.mark.usefixtures("offline")

BAD = [
    ("select best without explore", drop("phases.explore"),
     "phases.confirm.select: 'best' is not allowed: 'best' picks", "select: best"),
    ("select model without explore", lambda s: (s["phases"].pop("explore"),
                                                 s["phases"]["confirm"].update(select="model")),
     "phases.confirm.select: 'model' is not allowed: 'model' fits a curve", "select: model"),
    ("select model over two factors",
     {"phases.confirm.select": "model", "search.dropout": {"type": "uniform", "low": 0.0,
                                                           "high": 0.3}},
     "phases.confirm.select: 'model' is not allowed: 'model' fits a curve in the log of one "
     "loguniform search factor (the lr); this study searches lr, dropout", "select: model"),
    ("explore without search", drop("search"),
     "phases.explore: the explore phase samples the `search` factors", "explore:"),
    ("select list with wrong keys", {"phases.confirm.select": [{"lr": 1e-4, "dropout": 0.2}]},
     "phases.confirm.select[0]: {'lr': 0.0001, 'dropout': 0.2} is not allowed: keys must be "
     "exactly the search factors (lr); missing: none; not searched: dropout", "- lr: 0.0001"),
    ("select value checked", {"phases.confirm.select": [{"lr": -1.0}]},
     "phases.confirm.select[0].lr: -1.0 is not allowed", "- lr: -1.0"),
    ("explore seeds not a subset", {"seeds": [0, 1, 2, 3, 4, 5, 6], "phases.explore.seeds": [0, 9]},
     "phases.explore.seeds[1]: 9 is not allowed: one of the study's seeds [0, 1, 2, 3, 4, 5, 6]",
     "- 9"),
    ("confirm seed count", {"seeds": [0, 1, 2, 3, 4], "phases.confirm.seeds": 5},
     "phases.confirm.seeds: 5 is not allowed: the pool `seeds` [0, 1, 2, 3, 4] has 3 seeds "
     "left after the 2 that earlier phases take", "seeds: 5"),
    ("overlapping seed lists", {"phases.explore.seeds": [0, 1], "phases.confirm.seeds": [1, 2]},
     "phases.confirm.seeds: [1, 2] is not allowed: seeds [1] also ran in explore, where they "
     "chose the configuration", "seeds:"),
    ("max_seeds below seeds", {"phases.confirm.max_seeds": 3},
     "phases.confirm.max_seeds: 3 is not allowed: a count >= seeds (5)", "max_seeds: 3"),
    ("rounds with a seed list", {"phases.confirm.seeds": [5, 6], "phases.confirm.max_seeds": 8},
     "phases.confirm.seeds: [5, 6] is not allowed: a count of seeds for the first round",
     "seeds:"),
    ("seeds repeated", {"seeds": [1, 2, 1]}, "seeds[2]: 1 is not allowed: it repeats seeds[0]",
     "- 1"),
    ("negative seed", {"seeds": [1, -2]}, "seeds[1]: -2 is not allowed", "- -2"),
    ("no phases", {"phases": {}}, "phases: no phase", "phases: {}"),
    ("unknown phase", {"phases.warmup": {"samples": 1}},
     "phases.warmup: unknown key 'warmup'; known keys: explore, confirm", "warmup:"),
    ("more samples than the space holds",
     {"search.lr": {"type": "categorical", "choices": [1.0e-4, 3.0e-4]},
      "phases.explore.samples": 3},
     "phases.explore.samples: 3 is not allowed: at most 2: the searched factors have 2 distinct",
     "samples: 3"),
    ("samples zero", {"phases.explore.samples": 0},
     "phases.explore.samples: 0 is not allowed: Optuna samples per arm", "samples: 0"),
    ("asha reduction factor", {"phases.explore.asha.reduction_factor": 1},
     "phases.explore.asha.reduction_factor: 1 is not allowed", "reduction_factor: 1"),
    ("sampler misspelt", {"phases.explore.sampler": "tpee"},
     "phases.explore.sampler: 'tpee' is not an Optuna sampler here (did you mean 'tpe'?); one "
     "of tpe, random, gp (default tpe)", "sampler: tpee"),
    ("sampler not a name", {"phases.explore.sampler": 3},
     "phases.explore.sampler: 3 is not an Optuna sampler here; one of tpe", "sampler: 3"),
    ("sampler seed negative", {"phases.explore.sampler_seed": -1},
     "phases.explore.sampler_seed: -1 is not allowed: the samplers' seed, an integer >= 0",
     "sampler_seed: -1"),
    ("asha's first rung inside the default warm-up", {"phases.explore.asha.grace_period": 0.25},
     "phases.explore.asha.grace_period: 0.25 is not allowed: more than 0.3 epochs: the lr warms "
     "up over the first 0.3 of 3 epochs", "grace_period: 0.25"),
    ("asha's first rung inside a fixed warm-up", {"fixed.warmup_ratio": 0.5},
     "phases.explore.asha.grace_period: 1.0 is not allowed: more than 1.5 epochs: the lr warms "
     "up over the first 1.5 of 3 epochs", "grace_period: 1"),
    ("asha missing grace", drop("phases.explore.asha.grace_period"),
     "phases.explore.asha.grace_period is missing", "asha:"),
    ("checkpoint cadence negative", {"phases.confirm.checkpoint_every_s": -1},
     "phases.confirm.checkpoint_every_s: -1 is not allowed: a number of seconds >= 0",
     "checkpoint_every_s: -1"),
    ("checkpoint cadence as text", {"phases.confirm.checkpoint_every_s": "1 min"},
     "phases.confirm.checkpoint_every_s: '1 min' is not allowed: a number of seconds >= 0",
     "checkpoint_every_s: 1 min"),
]  # fmt: skip


test_errors_name_file_line_field_value_and_allowed = one_line_error_test(BAD)


def test_confirm_seeds_in_rounds_and_reused_explore_seeds(tmp_path, study):
    study["phases"]["confirm"].update(max_seeds=12, step=4)
    rounds = load_study(str(write(tmp_path, study))).confirm
    assert rounds.seeds == tuple(range(2, 14)) and rounds.looks == (5, 9, 12)
    assert [rounds.round_seeds(i) for i in range(3)] == [
        (2, 3, 4, 5, 6), (7, 8, 9, 10), (11, 12, 13)]  # fmt: skip
    study["phases"]["confirm"] = {"seeds": 5, "reuse_explore_seeds": True, "data_seeds": 2}
    reused = load_study(str(write(tmp_path, study))).confirm
    assert reused.seeds == (0, 1, 2, 3, 4) and reused.reuse_explore_seeds
    assert reused.data_seeds == (0, 1) and reused.looks == (5,)
    study["phases"]["explore"]["seeds"] = [0, 1]
    study["phases"]["confirm"]["seeds"] = [1, 2]  # overlapping lists: allowed when declared
    assert load_study(str(write(tmp_path, study))).confirm.seeds == (1, 2)


def test_confirm_only_without_search_runs_each_arm_once(tmp_path, study):
    del study["search"]
    study["phases"] = {"confirm": {"seeds": 3}}
    loaded = load_study(str(write(tmp_path, study)))
    assert loaded.search == {}
    assert loaded.confirm == ConfirmPhase(({},), (0, 1, 2))


def test_confirm_checkpoints_once_a_minute_unless_told(tmp_path, study):
    """The cadence is read, and the plan (`--dry-run`) says it."""
    loaded = load_study(str(write(tmp_path, study)))
    assert loaded.confirm.checkpoint_every_s == 60.0
    assert "(never pruned; a checkpoint at most every 60 s)" in make_plan(loaded).describe()
    study["phases"]["confirm"]["checkpoint_every_s"] = 0
    loaded = load_study(str(write(tmp_path, study)))
    assert loaded.confirm.checkpoint_every_s == 0.0
    assert "(never pruned; a checkpoint per evaluation)" in make_plan(loaded).describe()


def test_explore_checkpoints_at_every_evaluation_only_under_asha(tmp_path, study):
    """Without ASHA no explore seed is ever paused, so its trials keep confirm's cadence; under
    ASHA a paused seed resumes from its last checkpoint, so every evaluation writes one."""
    from study.plan import checkpoint_every_s

    study["phases"]["explore"].pop("asha", None)
    study["phases"]["confirm"]["checkpoint_every_s"] = 90
    loaded = load_study(str(write(tmp_path, study)))
    assert checkpoint_every_s(loaded, "explore") == checkpoint_every_s(loaded, "confirm") == 90
    assert "no pruning; a checkpoint at most every 90 s" in make_plan(loaded).describe()
    study["phases"]["explore"].update(samples=6, asha={"grace_period": 1, "reduction_factor": 2})
    loaded = load_study(str(write(tmp_path, study)))
    assert (
        checkpoint_every_s(loaded, "explore") == 0 and checkpoint_every_s(loaded, "confirm") == 90
    )
    assert "a checkpoint per evaluation" in make_plan(loaded).describe()


def test_asha_with_few_samples_per_arm_says_so_in_the_plan(tmp_path, study):
    """Ray's ASHA is asynchronous: below 6 samples per arm the dry run says that each rung's
    first sample goes on uncompared; from 6 it says nothing of the kind."""
    for samples, warned in ((4, True), (6, False)):
        study["phases"]["explore"]["samples"] = samples
        described = make_plan(load_study(str(write(tmp_path, study)))).describe()
        assert "ASHA per arm, grace 1 epochs, reduction 2" in described
        note = f"with {samples} samples per arm (< 6) each rung's first sample goes on uncompared"
        assert (note in described) == warned, described
