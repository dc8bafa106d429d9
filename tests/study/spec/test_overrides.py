"""Command-line overrides (`--set KEY=VALUE`) and paths relative to the study file.

An override is checked exactly like the file, and an error in it names the override; a path in
the file means the file's folder, a path in an override the folder the command was typed in.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from study.execution.state import LAYOUT_KEY, LAYOUT_VERSION
from study.spec import SpecError, check_same_overrides, load_study
from tests.study_helpers import run_in_process, study_command, write_study


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def study(tmp_path, tiny_model, tiny_corpus) -> Path:
    return write_study(tmp_path, str(tiny_model), tiny_corpus)


def test_overrides_replace_values_after_the_profile(study):
    spec = load_study(str(study), overrides=[
        "fixed.epochs=2", "grid.depth=[1, 2, 3]", "search.lr.choices.1=1e-3",
        "phases.confirm.seeds=3", "max_failures=1", "fixed.dropout=0.2",
    ])  # fmt: skip
    assert spec.fixed["epochs"] == 2 and spec.fixed["dropout"] == 0.2
    assert spec.grid["depth"] == (1, 2, 3)
    assert spec.search["lr"].choices == (1e-6, 1e-3)
    assert spec.confirm.seeds == (2, 3, 4) and spec.max_failures == 1
    assert spec.raw["fixed"]["epochs"] == 2  # the merged study that MLflow records


def test_null_removes_a_key_as_in_a_profile(study):
    spec = load_study(str(study), overrides=["phases.explore=null", "search=null",
                                             "phases.confirm.select=[{}]"])  # fmt: skip
    assert spec.explore is None and spec.search == {}


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("fixed.epochs=abc",
         "--set fixed.epochs=abc: fixed.epochs: 'abc' is not allowed: epochs takes an integer"),
        ("fixed.epohcs=5",
         "--set fixed.epohcs=5: fixed.epohcs: unknown factor 'epohcs' (did you mean 'epochs'?)"),
        ("phases.explore.smaples=3", "--set phases.explore.smaples=3: phases.explore.smaples: "
         "unknown key 'smaples' (did you mean 'samples'?)"),
        ("descripton=x", "--set descripton=x: descripton: unknown key 'descripton' (did you "
         "mean 'description'?)"),
        ("data.tset=a.txt", "--set data.tset=a.txt: data.tset: unknown key 'tset' for data "
         "(did you mean 'test'?)"),
        ("grid.depth.1=7", "--set grid.depth.1=7: grid.depth[1]: 7 is not allowed: the model "
         "has 3 layers"),
        ("grid.depth.4=7", "--set grid.depth.4=7: grid.depth has 2 item(s); indices are 0..1"),
        ("fixed.epochs", "--set fixed.epochs: expected KEY=VALUE"),
        ("fixed..x=1", "--set fixed..x=1: expected KEY=VALUE"),
        ("fixed.epochs=[1,", "--set fixed.epochs=[1,: the value is not valid YAML"),
        ("metric.name.x=1", "--set metric.name.x=1: metric.name is 'dev_loss', which has no "
         "keys; set metric.name itself"),
        ("profiles.smoke.seeds=1", "--set profiles.smoke.seeds=1: profiles cannot be set"),
        ("search.lr={type: uniform, low: 1e-5}", "--set search.lr={type: uniform, low: 1e-5}: "
         "search.lr.high is missing"),
    ],
)  # fmt: skip
def test_a_bad_override_is_one_line_naming_it(study, override, expected):
    with pytest.raises(SpecError) as caught:
        load_study(str(study), overrides=[override])
    message = str(caught.value)
    assert "\n" not in message and message.startswith(expected), message


def test_resume_compares_overrides_by_what_they_set():
    check_same_overrides(["fixed.epochs=5"], ["fixed.epochs = 5"])
    check_same_overrides([], [])
    with pytest.raises(SpecError, match=r"started with --set fixed.epochs=5, this command "
                       r"gives --set fixed.epochs=6"):  # fmt: skip
        check_same_overrides(["fixed.epochs=5"], ["fixed.epochs=6"])
    with pytest.raises(SpecError, match="started with no --set options, this command gives"):
        check_same_overrides([], ["fixed.epochs=6"])


def _relative_study(folder: Path, tiny_model: Path, tiny_corpus: dict) -> Path:
    """A study file whose data and model sit beside it, written as relative paths."""
    folder.mkdir(parents=True)
    shutil.copytree(tiny_model, folder / "models" / "tiny")
    for split, source in tiny_corpus.items():
        shutil.copy(source, folder / f"{split}.txt")
    data = {"train": "train.txt", "dev": "./dev.txt", "test": {"conll": "test.txt"}}
    return write_study(folder, "models/tiny", data)


def test_paths_resolve_against_the_study_files_folder(
    tmp_path, tiny_model, tiny_corpus, monkeypatch
):
    folder = tmp_path / "project"
    study = _relative_study(folder, tiny_model, tiny_corpus)
    monkeypatch.chdir(tmp_path)  # anywhere but the study's folder
    spec = load_study(str(study))
    assert spec.model == str(folder / "models" / "tiny") and spec.model_layers == 3
    assert spec.data == {"train": str(folder / "train.txt"), "dev": str(folder / "dev.txt"),
                         "test": {"conll": str(folder / "test.txt")}}  # fmt: skip


def test_the_command_line_reads_paths_beside_the_study_file(tmp_path, tiny_model, tiny_corpus):
    """Run from the repository, the study's relative model and data paths name its folder."""
    folder = tmp_path / "project"
    study = _relative_study(folder, tiny_model, tiny_corpus)
    code, out, err = run_in_process(study_command(study, tmp_path, "--dry-run"))
    assert code == 0, err
    assert f"model {folder}/models/tiny, data {{'train': '{folder}/train.txt'" in out
    assert "[1] depth=2" in out  # full-1 of the 3-layer model read from its folder


def test_paths_in_overrides_resolve_against_the_current_folder(
    tmp_path, tiny_model, tiny_corpus, monkeypatch
):
    study = _relative_study(tmp_path / "project", tiny_model, tiny_corpus)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    spec = load_study(str(study), overrides=["data.dev=mine.txt", "data.extra.x=~/x.txt"])
    assert spec.data["dev"] == str(here / "mine.txt")
    assert spec.data["extra"]["x"] == str(Path("~/x.txt").expanduser())


def test_hub_ids_and_dataset_names_stay_names(study, tmp_path):
    (tmp_path / "local_ds").mkdir()
    data = {"train": {"hf": "someone/a-dataset", "split": "train"},
            "dev": {"hf": "local_ds", "split": "validation"}, "test": {"embedded": None},
            "embedded": None}  # fmt: skip
    edited = yaml.safe_load(study.read_text())
    edited.update(model="someone/not-a-cached-model", data={**data, "test": data["train"]})
    study.write_text(yaml.safe_dump(edited))
    spec = load_study(str(study))
    assert spec.model == "someone/not-a-cached-model"
    assert spec.data["train"]["hf"] == "someone/a-dataset"
    assert spec.data["dev"]["hf"] == str(tmp_path / "local_ds")  # a folder beside the study


def test_the_command_line_applies_overrides_to_the_plan(study, tmp_path):
    extra = ["--dry-run", "--set", "grid.depth=[1, 2, 3]", "--set", "phases.confirm.seeds=3"]
    code, out, err = run_in_process(study_command(study, tmp_path, *extra))
    assert code == 0, err
    assert "confirm: 3 arms x 1 samples x 3 seeds [2, 3, 4] = 9 trials" in out


def test_resume_refuses_other_overrides_in_one_line_and_writes_nothing(study, tmp_path):
    """The run being resumed was started with `--set fixed.epochs=3` (its state file says
    so); resuming with another value, or with none, is refused before anything is written."""
    folder = tmp_path / "ray_results" / "teststudy" / "default-20260101-000000"
    folder.mkdir(parents=True)
    state = {"invocation": "abc", "profile": "default", "overrides": ["fixed.epochs=3"],
             LAYOUT_KEY: LAYOUT_VERSION}  # fmt: skip
    (folder / "study.json").write_text(json.dumps(state))
    for extra in (["--set", "fixed.epochs=2"], []):
        code, _, err = run_in_process(study_command(study, tmp_path, "--resume", *extra))
        assert code == 2
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("error: --resume: the run being resumed was started with "
                                   "--set fixed.epochs=3, this command gives")  # fmt: skip
        assert not (tmp_path / "mlflow.db").exists()
        assert sorted(p.name for p in folder.iterdir()) == ["study.json"]
