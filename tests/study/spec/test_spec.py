"""Study files: loading, profiles, and one-line errors that point at the file, line and field.

Everything runs on the tiny 3-layer, 4-head BERT folder from conftest, offline.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from transformers import AutoConfig

from study import spec
from study.analysis import Analysis
from study.spec import (
    AshaSettings,
    Categorical,
    ConfirmPhase,
    ExplorePhase,
    LogUniform,
    Metric,
    SpecError,
    known_studies,
    load_study,
)
from trainables.errors import ConfigError


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No test here may reach the network, as on an air-gapped cluster node."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def base_study(model: Path) -> dict:
    return {
        "description": "Does depth matter for NER on tweets?",
        "model": str(model),
        "data": {"embedded": "wnut16"},
        "metric": {"name": "dev_f1", "mode": "max"},
        "grid": {"depth": ["full", "full-1"], "data_fraction": [0.1, 1.0]},
        "search": {"lr": {"type": "loguniform", "low": 1.0e-5, "high": 3.0e-4}},
        "fixed": {"epochs": 3, "batch_size": 16},
        "seeds": 5,
        "phases": {
            "explore": {
                "samples": 4,
                "seeds": 2,
                "asha": {"grace_period": 1, "reduction_factor": 2},
            },
            "confirm": {"select": "best"},
        },
        "resources": {"cpu": 1, "gpu": 0},
        "max_failures": 1,
        "profiles": {
            "smoke": {"fixed": {"epochs": 1}, "grid": {"depth": [1]}, "seeds": 2},
            "cluster": {"model": "someone/not-a-cached-model", "resources": {"gpu": 0.5}},
        },
    }


def write(folder: Path, data: dict | str, name: str = "study") -> Path:
    text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def study(tiny_model) -> dict:
    return base_study(tiny_model)


def test_valid_study_loads_and_resolves_full_depths(tmp_path, study):
    path = write(tmp_path, study)
    loaded = load_study("study", profile=None, folder=tmp_path)
    assert (loaded.name, loaded.path, loaded.profile) == ("study", path.resolve(), None)
    assert (loaded.model_layers, loaded.model_heads) == (3, 4)
    assert loaded.grid == {"depth": (3, 2), "data_fraction": (0.1, 1.0)}
    assert loaded.search == {"lr": LogUniform(low=1.0e-5, high=3.0e-4)}
    assert loaded.fixed == {"epochs": 3, "batch_size": 16}
    assert loaded.seeds == 5
    assert loaded.explore == ExplorePhase(4, (0, 1), AshaSettings(1.0, 2.0))
    # held-out seeds: the confirm count starts after the seeds explore chose with
    assert loaded.confirm == ConfirmPhase("best", (2, 3, 4, 5, 6))
    assert loaded.analysis == Analysis("test_f1", 0.01, 0.05, "obrien_fleming", (5,),
                                       (2, 3, 4, 5, 6), 1)  # fmt: skip
    assert loaded.metric == Metric()
    assert loaded.resources == {"cpu": 1.0, "gpu": 0.0}
    assert loaded.max_failures == 1
    assert loaded.data == {"embedded": "wnut16"}
    assert "profiles" not in loaded.raw and loaded.raw["grid"]["depth"] == ["full", "full-1"]


def test_loads_by_path_and_lists_known_studies(tmp_path, study):
    write(tmp_path, study, "b_study")
    write(tmp_path, study, "a_study")
    assert known_studies(tmp_path) == ["a_study", "b_study"]
    assert known_studies(tmp_path / "missing") == []
    assert load_study(str(tmp_path / "a_study.yaml"), folder=Path("/nonexistent")).name == "a_study"


def test_defaults_for_optional_sections(tmp_path, study):
    for key in ("metric", "resources", "max_failures", "data", "profiles"):
        del study[key]
    study["phases"] = {"confirm": {"select": [{"lr": 1.0e-4}, {"lr": 5.0e-5}], "seeds": [4, 1]}}
    loaded = load_study(str(write(tmp_path, study)))
    assert loaded.metric == Metric("dev_f1", "max")
    assert loaded.resources == {"cpu": 1.0, "gpu": 0.0}
    assert loaded.max_failures == 0
    assert loaded.data == {"embedded": "wnut16"}
    assert loaded.explore is None
    assert loaded.confirm == ConfirmPhase(({"lr": 1.0e-4}, {"lr": 5.0e-5}), (4, 1))


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


def test_profile_deep_merges_onto_the_base(tmp_path, study):
    write(tmp_path, study)
    smoke = load_study("study", profile="smoke", folder=tmp_path)
    assert smoke.profile == "smoke"
    assert smoke.fixed == {"epochs": 1, "batch_size": 16}  # merged key by key
    assert smoke.grid == {"depth": (1,), "data_fraction": (0.1, 1.0)}  # the list is replaced
    assert smoke.seeds == 2
    assert smoke.raw["fixed"] == {"epochs": 1, "batch_size": 16}
    base = load_study("study", folder=tmp_path)  # no 'default' profile: the base is used
    assert base.profile is None and base.fixed["epochs"] == 3


def test_default_profile_is_applied_unless_profile_is_none(tmp_path, study):
    study["profiles"]["default"] = {"fixed": {"epochs": 2}}
    write(tmp_path, study)
    assert load_study("study", folder=tmp_path).fixed["epochs"] == 2
    assert load_study("study", profile=None, folder=tmp_path).fixed["epochs"] == 3


def test_profile_changing_a_distribution_type_replaces_it(tmp_path, study):
    choices = [1.0e-4, 2.0e-4, 3.0e-4, 4.0e-4]  # as many as explore samples: none drawn twice
    study["profiles"]["smoke"]["search"] = {"lr": {"type": "categorical", "choices": choices}}
    write(tmp_path, study)
    smoke = load_study("study", profile="smoke", folder=tmp_path)
    assert smoke.search["lr"] == Categorical(choices=tuple(choices))


def test_profile_can_switch_a_phase_off(tmp_path, study):
    study["profiles"]["smoke"]["phases"] = {"explore": None, "confirm": {"select": [{"lr": 1e-4}]}}
    write(tmp_path, study)
    smoke = load_study("study", profile="smoke", folder=tmp_path)
    assert smoke.explore is None and smoke.confirm.select == ({"lr": 1e-4},)


def test_hub_model_not_in_cache_keeps_depths_symbolic(tmp_path, study):
    write(tmp_path, study)
    cluster = load_study("study", profile="cluster", folder=tmp_path)
    assert (cluster.model_layers, cluster.model_heads) == (0, 0)
    assert cluster.grid["depth"] == ("full", "full-1")
    assert cluster.resources == {"cpu": 1.0, "gpu": 0.5}


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


def test_unknown_study_lists_known_ones(tmp_path, study):
    write(tmp_path, study, "ner_depth")
    write(tmp_path, study, "ner_reinit")
    with pytest.raises(SpecError, match="unknown study 'ner_dpeth'.*ner_depth, ner_reinit"):
        load_study("ner_dpeth", folder=tmp_path)


def test_missing_study_path(tmp_path):
    with pytest.raises(SpecError, match="no such study file"):
        load_study(str(tmp_path / "absent.yaml"))


def test_unknown_profile_lists_the_files_profiles(tmp_path, study):
    write(tmp_path, study)
    with pytest.raises(SpecError, match=r"no profile 'laptop'.*profiles: smoke, cluster$"):
        load_study("study", profile="laptop", folder=tmp_path)


def test_spec_error_is_a_config_error():
    assert issubclass(SpecError, ConfigError)


def test_yaml_syntax_error_has_line_and_column(tmp_path):
    path = write(tmp_path, "description: x\ngrid:\n  depth: [1, 2\nseeds: 3\n")
    with pytest.raises(SpecError) as caught:
        load_study(str(path))
    message = str(caught.value)
    assert re.match(re.escape(spec._display(path)) + r":\d+:\d+: YAML syntax error: \S", message)
    assert "\n" not in message


def test_duplicate_keys_are_an_error(tmp_path, tiny_model):
    text = f"description: x\nmodel: {tiny_model}\nfixed:\n  epochs: 2\n  epochs: 3\n"
    path = write(tmp_path, text)
    with pytest.raises(SpecError, match=r":5: fixed\.epochs: duplicate key .*line 4"):
        load_study(str(path))


def test_error_in_profile_points_at_the_profile_line(tmp_path, study):
    study["profiles"]["smoke"]["fixed"]["epochs"] = 0
    path = write(tmp_path, study)
    with pytest.raises(SpecError) as caught:
        load_study("study", profile="smoke", folder=tmp_path)
    line = error_line(caught.value, path)
    assert "profiles.smoke.fixed.epochs: 0 is not allowed: expected >= 1" in str(caught.value)
    assert path.read_text().splitlines()[line - 1].strip() == "epochs: 0"
    assert load_study("study", folder=tmp_path).fixed["epochs"] == 3  # the base is fine


def test_unsupported_model_type_names_the_model_field(tmp_path, study):
    folder = tmp_path / "gpt2"
    AutoConfig.for_model("gpt2", n_layer=2).save_pretrained(folder)
    study["model"] = str(folder)
    with pytest.raises(SpecError, match=r"model: '.*gpt2' is not allowed: model type 'gpt2'"):
        load_study(str(write(tmp_path, study)))


def test_missing_local_model_names_the_model_field(tmp_path, study):
    study["model"] = str(tmp_path / "no-such-model")
    path = write(tmp_path, study)
    with pytest.raises(SpecError) as caught:
        load_study(str(path))
    assert error_line(caught.value, path) == 2
    assert "model: " in str(caught.value) and "does not exist" in str(caught.value)


def test_arm_checks_use_the_arms_own_depth(tmp_path, study):
    study["grid"]["depth"] = ["full", 1]
    study["fixed"]["reinit_from"] = 2
    path = write(tmp_path, study)
    with pytest.raises(SpecError) as caught:
        load_study(str(path))
    assert str(caught.value).endswith(
        "fixed.reinit_from: 2 is not allowed: arms with depth 1 (grid.depth[1]) keep 1 layer; "
        "use 0..1"
    )


def set_in(data: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        data = data.setdefault(key, {})
    data[last] = value


def drop(dotted: str):
    def edit(data: dict) -> None:
        *parents, last = dotted.split(".")
        for key in parents:
            data = data[key]
        del data[last]

    return edit


# (id, edits as {dotted path: value} or a function, what the message says, the stripped text
# of the line it must point at)
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
    ("low above high", {"search.lr.low": 1.0e-3},
     "search.lr.low: 0.001 is not allowed: low must be below high (0.0003)", "low: 0.001"),
    ("loguniform low zero", {"search.lr.low": 0.0},
     "search.lr.low: 0.0 is not allowed: a loguniform low must be > 0", "low: 0.0"),
    ("int bounds not ints", {"search.max_length": {"type": "int", "low": 8.5, "high": 32}},
     "search.max_length.low: 8.5 is not allowed: an integer bound", "low: 8.5"),
    ("int step", {"search.max_length": {"type": "int", "low": 8, "high": 32, "step": 0}},
     "search.max_length.step: 0 is not allowed", "step: 0"),
    ("uniform on an int factor", {"search.eval_every": {"type": "uniform", "low": 1, "high": 4}},
     "search.eval_every.type: 'uniform' is not allowed: eval_every takes an integer or null; "
     "use int or categorical", "type: uniform"),
    ("categorical empty", {"search.dropout": {"type": "categorical", "choices": []}},
     "search.dropout.choices: [] is not allowed: a non-empty list", "choices: []"),
    ("unknown distribution", {"search.lr.type": "normal"},
     "search.lr.type: 'normal' is not allowed: one of loguniform", "type: normal"),
    ("distribution type as a list", {"search.lr.type": ["loguniform"]},
     "search.lr.type: ['loguniform'] is not allowed: one of loguniform", "type:"),
    ("distribution key", {"search.lr.choices": [1]},
     "search.lr.choices: unknown key 'choices' for a loguniform distribution", "choices:"),
    ("bound outside the trial range", {"search.warmup_ratio": {"type": "uniform", "low": 0.0,
     "high": 1.0}}, "search.warmup_ratio.high: 1.0 is not allowed: expected in [0, 1)",
     "high: 1.0"),
    ("select best without explore", drop("phases.explore"),
     "phases.confirm.select: 'best' is not allowed: 'best' picks", "select: best"),
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
    ("unknown primary metric", {"analysis": {"primary": "test_f2"}},
     "analysis.primary: 'test_f2' is not allowed: one of test_f1, dev_f1, curve_area, "
     "steps_to_95, dev_loss, test_loss (did you mean 'test_f1'?)", "primary: test_f2"),
    ("negative margin", {"analysis": {"margin": -0.01}},
     "analysis.margin: -0.01 is not allowed: a margin >= 0", "margin: -0.01"),
    ("alpha out of range", {"analysis": {"alpha": 0.7}},
     "analysis.alpha: 0.7 is not allowed: a level in (0, 0.5)", "alpha: 0.7"),
    ("unknown spending", {"analysis": {"spending": "haybittle"}},
     "analysis.spending: 'haybittle' is not allowed: one of obrien_fleming, pocock",
     "spending: haybittle"),
    ("max_seeds below seeds", {"phases.confirm.max_seeds": 3},
     "phases.confirm.max_seeds: 3 is not allowed: a count >= seeds (5)", "max_seeds: 3"),
    ("rounds with a seed list", {"phases.confirm.seeds": [5, 6], "phases.confirm.max_seeds": 8},
     "phases.confirm.seeds: [5, 6] is not allowed: a count of seeds for the first round",
     "seeds:"),
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
    ("asha missing grace", drop("phases.explore.asha.grace_period"),
     "phases.explore.asha.grace_period is missing", "asha:"),
    ("unknown top-level key", {"epochs": 3},
     "epochs: unknown key 'epochs' (factors go under grid, search or fixed); known keys: "
     "description, model", "epochs: 3"),
    ("profile key", {"profiles.smoke.epochs": 1},
     "profiles.smoke.epochs: unknown key 'epochs'", "epochs: 1"),
    ("metric mode", {"metric.mode": "maximize"},
     "metric.mode: 'maximize' is not allowed: 'max' or 'min'", "mode: maximize"),
    ("cpu zero", {"resources.cpu": 0}, "resources.cpu: 0 is not allowed: cpus > 0", "cpu: 0"),
    ("gpu negative", {"resources.gpu": -1}, "resources.gpu: -1 is not allowed", "gpu: -1"),
    ("max_failures negative", {"max_failures": -1}, "max_failures: -1 is not allowed",
     "max_failures: -1"),
    ("trial range", {"fixed.warmup_ratio": 1.5},
     "fixed.warmup_ratio: 1.5 is not allowed: expected in [0, 1)", "warmup_ratio: 1.5"),
    ("trial type", {"fixed.epochs": "three"},
     "fixed.epochs: 'three' is not allowed: epochs takes an integer", "epochs: three"),
    ("number quoted as text", {"fixed.lr": "0.001", "search": {}, "phases.explore": None,
     "phases.confirm.select": None}, "(0.001 is quoted, so YAML reads it as text", "lr: '0.001'"),
    ("missing description", drop("description"), "description is missing", None),
    ("data not a mapping", {"data": "wnut16"}, "data: 'wnut16' is not allowed", "data: wnut16"),
]  # fmt: skip


def error_line(err: Exception, path: Path) -> int:
    message = str(err)
    assert "\n" not in message, message
    match = re.match(re.escape(spec._display(path)) + r":(\d+): ", message)
    assert match, message
    return int(match.group(1))


@pytest.mark.parametrize(("edits", "expected", "line_text"), [case[1:] for case in BAD],
                         ids=[case[0] for case in BAD])  # fmt: skip
def test_errors_name_file_line_field_value_and_allowed(tmp_path, study, edits, expected, line_text):
    data = copy.deepcopy(study)
    if callable(edits):
        edits(data)
    else:
        for dotted, value in edits.items():
            set_in(data, dotted, value)
    path = write(tmp_path, data)
    with pytest.raises(SpecError) as caught:
        load_study("study", folder=tmp_path)
    line = error_line(caught.value, path)
    assert expected in str(caught.value)
    if line_text is not None:
        assert path.read_text().splitlines()[line - 1].strip() == line_text


def test_one_head_at_a_time_shorthand_expands_to_arms(tmp_path, study):
    study["grid"] = {"reinit_heads": {"one_head_in_blocks": [0, -1]}}
    study["compare"] = {"baseline": {"reinit_heads": []}}
    del study["profiles"]
    loaded = load_study(write(tmp_path, study).stem, folder=tmp_path)
    heads = [[[0, h]] for h in range(4)] + [[[2, h]] for h in range(4)]  # 3 layers, 4 heads
    assert list(loaded.grid["reinit_heads"]) == [[], *heads]
    assert loaded.compare_baseline == {"reinit_heads": []}


def test_compare_baseline_is_resolved_like_the_grid(tmp_path, study):
    study["compare"] = {"baseline": {"depth": "full"}}
    loaded = load_study(write(tmp_path, study).stem, folder=tmp_path, profile=None)
    assert loaded.compare_baseline == {"depth": 3}


@pytest.mark.parametrize(
    ("compare", "expected"),
    [
        ({"baseline": {"lr": 1e-4}}, "compare.baseline.lr: 'lr' is not a grid factor; grid "
                                     "factors: depth, data_fraction"),
        ({"baseline": {"data_fraction": 0.5}}, "compare.baseline.data_fraction: 0.5 is not "
                                               "allowed: one of the grid's values: 0.1, 1.0"),
        ({"against": {}}, "compare.against: unknown key 'against' for compare"),
        ({"baseline": [1]}, "compare.baseline: [1] is not allowed: a mapping of grid factors"),
    ],
)  # fmt: skip
def test_bad_compare_is_one_line_naming_the_field(tmp_path, study, compare, expected):
    study["compare"] = compare
    path = write(tmp_path, study)
    with pytest.raises(SpecError) as caught:
        load_study(path.stem, folder=tmp_path, profile=None)
    error_line(caught.value, path)
    assert expected in str(caught.value)


def test_bad_head_block_names_the_shorthand(tmp_path, study):
    study["grid"] = {"reinit_heads": {"one_head_in_blocks": [0, 3]}}
    path = write(tmp_path, study)
    with pytest.raises(SpecError) as caught:
        load_study(path.stem, folder=tmp_path, profile=None)
    error_line(caught.value, path)
    assert "grid.reinit_heads.one_head_in_blocks[1]: 3 is not allowed" in str(caught.value)


REAL_STUDIES = sorted(spec.SEARCH_SPACES.glob("*.yaml")) if spec.SEARCH_SPACES.is_dir() else []


def real_profiles(path: Path) -> list[str | None]:
    profiles = (yaml.safe_load(path.read_text()) or {}).get("profiles") or {}
    return [None, *profiles]


@pytest.mark.parametrize(
    ("path", "profile"),
    [(p, prof) for p in REAL_STUDIES for prof in real_profiles(p)] or [pytest.param(None, None,
     marks=pytest.mark.skip(reason="no study files in search_spaces/ yet"))],
)  # fmt: skip
def test_every_real_study_loads_under_each_profile(path, profile):
    """Hub models not in the local cache load with unknown layer counts (see `load_study`)."""
    loaded = load_study(path.stem, profile=profile)
    assert loaded.grid and (loaded.explore or loaded.confirm)
