"""Reading a study file: found by name or path, defaults for what it leaves out, the model it
names, and one-line errors for YAML syntax, duplicate keys and the top-level sections.

Everything runs on the tiny 3-layer, 4-head BERT folder from conftest, offline.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from transformers import AutoConfig

from study import spec
from study.analysis import Analysis
from study.spec import (
    AshaSettings,
    ConfirmPhase,
    ExplorePhase,
    LogUniform,
    Metric,
    SpecError,
    known_studies,
    load_study,
)
from tests.study.spec.study_files import drop, error_line, one_line_error_test, write
from trainables.errors import ConfigError

pytestmark = pytest.mark.usefixtures("offline")

BAD = [
    ("unknown top-level key", {"epochs": 3},
     "epochs: unknown key 'epochs' (factors go under grid, search or fixed); known keys: "
     "description, trainable, model", "epochs: 3"),
    ("metric mode", {"metric.mode": "maximize"},
     "metric.mode: 'maximize' is not allowed: 'max' or 'min'", "mode: maximize"),
    ("cpu zero", {"resources.cpu": 0}, "resources.cpu: 0 is not allowed: cpus > 0", "cpu: 0"),
    ("gpu negative", {"resources.gpu": -1}, "resources.gpu: -1 is not allowed", "gpu: -1"),
    ("max_failures negative", {"max_failures": -1}, "max_failures: -1 is not allowed",
     "max_failures: -1"),
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
    ("missing description", drop("description"), "description is missing", None),
    ("data not a mapping", {"data": "wnut16"}, "data: 'wnut16' is not allowed", "data: wnut16"),
]  # fmt: skip


test_errors_name_file_line_field_value_and_allowed = one_line_error_test(BAD)


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


def test_unknown_study_lists_known_ones(tmp_path, study):
    write(tmp_path, study, "ner_depth")
    write(tmp_path, study, "ner_reinit")
    with pytest.raises(SpecError, match="unknown study 'ner_dpeth'.*ner_depth, ner_reinit"):
        load_study("ner_dpeth", folder=tmp_path)
    with pytest.raises(SpecError, match=r"'ner_dpeth' \(did you mean 'ner_depth'\?\); known"):
        load_study("ner_dpeth", folder=tmp_path)


def test_missing_study_path(tmp_path):
    with pytest.raises(SpecError, match="no such study file"):
        load_study(str(tmp_path / "absent.yaml"))


def test_spec_error_is_a_config_error():
    assert issubclass(SpecError, ConfigError)


def test_yaml_syntax_error_has_line_and_column(tmp_path):
    path = write(tmp_path, "description: x\ngrid:\n  depth: [1, 2\nseeds: 3\n")
    with pytest.raises(SpecError) as caught:
        load_study(str(path))
    message = str(caught.value)
    shown = re.escape(spec.display_path(path))
    assert re.match(shown + r":\d+:\d+: YAML syntax error: \S", message)
    assert "\n" not in message


def test_duplicate_keys_are_an_error(tmp_path, tiny_model):
    text = f"description: x\nmodel: {tiny_model}\nfixed:\n  epochs: 2\n  epochs: 3\n"
    path = write(tmp_path, text)
    with pytest.raises(SpecError, match=r":5: fixed\.epochs: duplicate key .*line 4"):
        load_study(str(path))


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
