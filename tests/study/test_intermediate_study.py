"""`intermediate` as a study factor: study files with stages load, name their arms by the stages,
resolve stage data beside the file and refuse bad stages in one line at the stage key's line;
`ner_intermediate` runs through the real command line (smoke), and with CoNLL-2003 files as
the intermediate stage when the shared corpus is there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from study.plan import make_plan
from study.spec import SpecError, load_study
from tests.study_helpers import REPO, run_study, runs_by_kind, tracking_uri, write_study

SPANS = {"name": "spans", "data": {"embedded": "wnut16", "untyped": True}, "epochs": 1}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def staged_study(folder: Path, model: Path, corpus: dict, stages: list, **more) -> Path:
    """The test study with `intermediate: [[], stages]` as its grid, confirm only."""
    study = write_study(
        folder, str(model), corpus, grid={"intermediate": [[], stages]}, search=None,
        fixed={"epochs": 2, "batch_size": 16, "max_length": 32, "lr": 3.0e-3},
        phases={"confirm": {"select": [{}], "seeds": 2}}, **more,
    )  # fmt: skip
    return study


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_ner_intermediate_names_its_arms_by_their_stages():
    for profile in ("default", "smoke", "cluster"):
        spec = load_study("ner_intermediate", profile, resolve_model_layers=False)
        arms = [arm.id for arm in make_plan(spec).arms]
        expected = (
            ["intermediate=none", "intermediate=conll", "intermediate=spans"]
            if profile == "cluster"  # the laptop designs add the compute-matched control
            else ["intermediate=none", "intermediate=spans", "intermediate=target_epoch"]
        )
        assert arms == expected  # fmt: skip
    plan = make_plan(load_study("ner_intermediate", "default"))
    described = plan.describe()
    assert "stages: spans {'data': {'embedded': 'wnut16', 'untyped': True}, 'epochs': 1}" \
        " -> target" in described  # fmt: skip
    assert "stages: target_epoch {'data': {'embedded': 'wnut16'}, 'epochs': 1} -> target" \
        in described  # fmt: skip
    assert plan.trials == 30


def test_ner_depth_on_a_cluster_also_scores_afrikaans_wikiann():
    spec = load_study("ner_depth", "cluster", resolve_model_layers=False)
    assert spec.data["extra"] == {
        "wikiann_af": {"hf": "unimelb-nlp/wikiann", "config": "af", "split": "test"}
    }
    assert "'wikiann_af': {'hf': 'unimelb-nlp/wikiann'" in make_plan(spec).describe()


def test_stage_data_paths_are_relative_to_the_study_file(
    tmp_path, tiny_model, tiny_corpus, monkeypatch
):
    local = {"train": "train.txt", "dev": "dev.txt", "test": "test.txt"}
    study = staged_study(tmp_path, tiny_model, tiny_corpus, [{"name": "own", "data": local}])
    monkeypatch.chdir(REPO)
    spec = load_study(str(study))
    stage = spec.grid["intermediate"][1][0]
    assert stage["data"] == {split: str(tmp_path / f"{split}.txt") for split in local}


@pytest.mark.parametrize(
    ("stages", "key", "message"),
    [
        ([{"name": "spans", "epochs": 1}], "name",
         "grid.intermediate[1][0]: data is missing: each stage trains on its own data"),
        ([{**SPANS, "probe": True}], "probe",
         "grid.intermediate[1][0].probe: not allowed in a stage: probe applies to the target"),
        ([{**SPANS, "bach_size": 8}], "bach_size",
         "grid.intermediate[1][0].bach_size: unknown stage key 'bach_size' (did you mean "
         "'batch_size'?)"),
        ([{**SPANS, "data": {"embedded": "wnut16", "untyped": "maybe"}}], "untyped",
         "grid.intermediate[1][0].data.untyped: 'maybe' is not allowed: true"),
    ],
)  # fmt: skip
def test_a_bad_stage_points_at_its_line(tmp_path, tiny_model, tiny_corpus, stages, key, message):
    study = staged_study(tmp_path, tiny_model, tiny_corpus, stages)
    line = next(i for i, text in enumerate(lines_of(study), 1) if f"{key}:" in text)
    with pytest.raises(SpecError) as raised:
        load_study(str(study))
    assert str(raised.value).startswith(f"{study}:{line}: {message}"), str(raised.value)


def test_stage_lists_must_be_told_apart_and_are_not_searched(tmp_path, tiny_model, tiny_corpus):
    unnamed = {"data": {"embedded": "wnut16"}}
    study = write_study(tmp_path, str(tiny_model), tiny_corpus, search=None,
                        grid={"intermediate": [[unnamed], [{**unnamed, "epochs": 2}]]})  # fmt: skip
    with pytest.raises(SpecError, match=r"grid.intermediate\[1\]: its stages are named 'stage0'"):
        load_study(str(study))
    searched = {"type": "categorical", "choices": [[], [SPANS]]}
    study = write_study(tmp_path, str(tiny_model), tiny_corpus, search={"intermediate": searched})
    with pytest.raises(SpecError, match="search.intermediate: intermediate is not searched"):
        load_study(str(study))


def test_a_stage_given_on_the_command_line_reads_paths_from_there(
    tmp_path, tiny_model, tiny_corpus, monkeypatch
):
    (tmp_path / "study").mkdir()
    study = staged_study(tmp_path / "study", tiny_model, tiny_corpus, [SPANS])
    monkeypatch.chdir(tmp_path)
    stage = "{name: own, data: {train: a.txt, dev: b.txt, test: c.txt}}"
    spec = load_study(str(study), overrides=[f"grid.intermediate=[[], [{stage}]]"])
    data = spec.grid["intermediate"][1][0]["data"]
    assert data == {split: str(tmp_path / f"{name}.txt")
                    for split, name in (("train", "a"), ("dev", "b"), ("test", "c"))}  # fmt: skip


@pytest.mark.study
def test_ner_intermediate_smoke_runs_from_the_command_line(tmp_path):
    done = run_study(REPO / "search_spaces" / "ner_intermediate.yaml", tmp_path,
                     "--profile", "smoke")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    runs = runs_by_kind(tmp_path, "ner_intermediate")
    assert sorted(r.data.tags["arm"] for r in runs["arm"]) == [
        "intermediate=none",
        "intermediate=spans",
        "intermediate=target_epoch",
    ]
    client = MlflowClient(tracking_uri(tmp_path))
    for run in runs["trial"]:
        staged = run.data.tags["arm"] != "intermediate=none"
        assert run.data.tags["status"] == "completed"
        metrics = run.data.metrics
        assert ("stage0_dev_f1" in metrics) == staged and metrics["test_f1"] >= 0
        assert metrics.get("intermediate_steps") == (20 if staged else None)
        if staged:  # the stage's evaluation at its own step 20, the target's after it
            steps = [m.step for m in client.get_metric_history(run.info.run_id, "stage0_dev_f1")]
            target = [m.step for m in client.get_metric_history(run.info.run_id, "dev_f1")]
            assert steps == [20] and min(target) > 20
            layers = client.get_metric_history(run.info.run_id, "dyn_stage0_l2_sum")
            assert sorted(m.step for m in layers) == [0, 1, 2, 3]
    report = tmp_path / "reports" / "ner_intermediate-smoke"
    page = (report / "README.md").read_text()
    assert "| arm | stages | n |" in page
    assert "| `intermediate=spans` | spans → target |" in page
    assert "## Intermediate stages" in page and "![stage_curves](stage_curves.png)" in page
    # each arm against the compute-matched control, the study's baseline
    assert "`intermediate=spans` vs `intermediate=target_epoch`" in page
    assert "`intermediate=none` vs `intermediate=target_epoch`" in page
    assert "`intermediate=spans` vs `intermediate=none`" not in page
    curves = (report / "stage_curves.csv").read_text().splitlines()
    # the study's metric names the column: dev_loss in the smoke profile (the tiny model's F1 is ~0)
    assert curves[0] == "arm,seed,stage,position,step,evaluation,dev_loss"
    assert any(",spans,0,20,0," in line for line in curves)
    assert (report / "stage_dynamics.png").is_file()


VALIDATION_ENV = "NER_VALIDATION"


def shared_conll() -> Path | None:
    """CoNLL-2003 beside the project (`../shared/data/conll2003`), or where NER_SHARED_DATA
    points (its `conll2003` folder), for a worktree that is not beside `shared/`."""
    roots = [Path(os.environ["NER_SHARED_DATA"])] if os.environ.get("NER_SHARED_DATA") else []
    for root in [*roots, REPO.parent / "shared" / "data"]:
        if all(
            (root / "conll2003" / f"{split}.txt").is_file() for split in ("train", "dev", "test")
        ):
            return root / "conll2003"
    return None


@pytest.mark.slow
@pytest.mark.study
def test_conll2003_as_the_intermediate_stage_of_wnut16(tmp_path):
    """The real MiniLM, 200 steps of CoNLL-2003 before WNUT-16 (30% of it, 2 epochs), against
    WNUT-16 alone, 3 seeds each: the per-arm table of a real transfer. A validation on the
    reference corpora, not a test of the code (the tiny-model stage tests are): it runs on
    request (NER_VALIDATION=1), as CI must not depend on ../shared/data."""
    if os.environ.get(VALIDATION_ENV) != "1":
        pytest.skip(
            f"a validation on CoNLL-2003 (minutes of real MiniLM): {VALIDATION_ENV}=1 runs it"
        )
    conll = shared_conll()
    if conll is None:
        pytest.skip("CoNLL-2003 is not at ../shared/data/conll2003 (or $NER_SHARED_DATA)")
    files = {split: str(conll / f"{split}.txt") for split in ("train", "dev", "test")}
    stage = {"name": "conll", "data": files, "max_steps": 200}
    study = yaml.safe_load((REPO / "search_spaces" / "ner_intermediate.yaml").read_text())
    study["grid"] = {"intermediate": [[], [stage]]}
    study.pop("compare")  # the shipped design's baseline, the control, is not an arm here
    study["fixed"] = {"lr": 1.5e-4, "epochs": 2, "batch_size": 16, "data_fraction": 0.3}
    study["seeds"], study["phases"] = 3, {"confirm": {"select": [{}], "seeds": 3}}
    del study["profiles"]
    path = tmp_path / "ner_intermediate.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    done = run_study(path, tmp_path, timeout=3000)
    assert done.returncode == 0, done.stderr[-3000:]
    page = (tmp_path / "reports" / "ner_intermediate" / "README.md").read_text()
    assert "| `intermediate=conll` | conll → target |" in page
    runs = runs_by_kind(tmp_path, "ner_intermediate")["trial"]
    staged = [r for r in runs if r.data.tags["arm"] == "intermediate=conll"]
    assert len(staged) == 3 and all(r.data.metrics["stage0_dev_f1"] > 0.3 for r in staged)
    print(page)  # the per-arm numbers, for the record (pytest -s)
