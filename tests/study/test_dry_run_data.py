"""`--dry-run` reads the data as the real run does (issue 49, item 5): for each kind of bad
data, the dry run and the real run exit 2 with the very same one line, and neither writes
anything; good data gives the dry run a line of what it read. Both go through
`study.run.main` in-process (tests/study_helpers.py `run_in_process`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.study_helpers import run_in_process, study_command, write_study

# a case: the study's folder and the base study's data -> (data edits, --set overrides, what
# the refusal's line holds)
Case = Callable[[Path, dict], tuple[dict, list[str], str]]


def _file(folder: Path, name: str, content: bytes) -> str:
    path = folder / name
    path.write_bytes(content)
    return str(path)


def _missing_train(folder: Path, data: dict):
    missing = "/nonexistent/train.txt"
    return {}, [f"data.train={missing}"], f"{missing}: file not found"


def _tag_outside_the_scheme(folder: Path, data: dict):
    path = _file(folder, "x_loc.txt", b"john\tB-PER\nparis\tX-LOC\n")
    return {"train": path}, [], f"{path}:2: tag 'X-LOC' is not in the BIO"


def _a_directory(folder: Path, data: dict):
    (folder / "a_folder").mkdir()
    return {"dev": str(folder / "a_folder")}, [], "a_folder"


def _not_utf8(folder: Path, data: dict):
    path = _file(folder, "latin1.txt", "jos\xe9\tB-PER\n".encode("latin-1"))
    return {"test": path}, [], "latin1.txt"


def _label_map_to_an_unknown_type(folder: Path, data: dict):
    extra = {"other": {"conll": data["dev"], "tag_map": {"PER": "PERSON"}}}
    return {"extra": extra}, [], "data.extra.other.tag_map.PER: 'PERSON' is not allowed"


def _bad_stage_data(folder: Path, data: dict):
    path = _file(folder, "stage.txt", b"john\tB-PER\nsmith\tE-PER\n")
    stage = {"name": "bad", "data": {**data, "train": path}}
    edits = {"__fixed__": {"epochs": 1, "intermediate": [stage]}}
    return edits, [], f"intermediate stage 'bad': {path}:2: tag 'E-PER' is not in the BIO"


CASES: dict[str, Case] = {
    "a missing file, by --set": _missing_train,
    "a tag outside the scheme (X-LOC)": _tag_outside_the_scheme,
    "a directory as a split": _a_directory,
    "a file not in UTF-8": _not_utf8,
    "a label map to a type training lacks": _label_map_to_an_unknown_type,
    "an intermediate stage's data": _bad_stage_data,
}


def _study(folder: Path, model: Path, corpus: dict, edits: dict) -> Path:
    fixed = edits.pop("__fixed__", None)
    study = write_study(folder, str(model), {**corpus, **edits})
    if fixed:
        doc = yaml.safe_load(study.read_text())
        doc["fixed"].update(fixed)
        study.write_text(yaml.safe_dump(doc, sort_keys=False))
    return study


def _written(tmp: Path) -> list[str]:
    """What a run left where studies write: MLflow, Ray's results, the reports."""
    places = ("mlflow.db", "mlartifacts", "reports", "ray_results")
    return sorted(str(p) for name in places for p in [tmp / name] if p.exists())


@pytest.mark.parametrize("name", CASES)
def test_dry_run_refuses_bad_data_with_the_real_runs_line(name, tmp_path, tiny_model, tiny_corpus):
    edits, overrides, expected = CASES[name](tmp_path, dict(tiny_corpus))
    study = _study(tmp_path, tiny_model, tiny_corpus, edits)
    sets = [part for text in overrides for part in ("--set", text)]
    lines = {}
    for mode, extra in (("dry run", ["--dry-run"]), ("real run", [])):
        code, out, err = run_in_process(study_command(study, tmp_path, *sets, *extra))
        assert code == 2, (mode, code, err[-2000:])
        # a real run says at once what it does (study.run.opening_line); a refusal stays
        # one line on stderr
        opening = [] if extra else ["study teststudy (profile default): checking the data"]
        assert [line[:52] for line in out.splitlines()] == opening, (mode, out)
        assert len(err.strip().splitlines()) == 1, (mode, err[-2000:])
        lines[mode] = err.strip()
        assert _written(tmp_path) == [], mode
    assert lines["dry run"] == lines["real run"]
    assert lines["dry run"].startswith("error: ") and expected in lines["dry run"], lines


def test_dry_run_says_what_data_it_read(tmp_path, tiny_model, tiny_corpus):
    study = write_study(tmp_path, str(tiny_model), tiny_corpus)
    code, out, err = run_in_process(study_command(study, tmp_path, "--dry-run"))
    assert code == 0, err[-2000:]
    read = [line for line in out.splitlines() if line.startswith("  data: ")]
    assert len(read) == 1 and " train / " in read[0] and "labels" in read[0], out
    assert _written(tmp_path) == []


def test_dry_run_plans_a_study_whose_hub_dataset_is_out_of_reach(
    tmp_path, tiny_model, tiny_corpus, monkeypatch
):
    """Planning a cluster's study on a laptop: a hub that does not answer is said, not
    refused (exit 0); the real run refuses it (exit 2), before it writes anything."""
    import datasets

    def unreachable(name, *args, **kwargs):  # what `datasets` raises with no network
        raise ConnectionError(f"Couldn't reach {name!r} on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    hub = {"hf": "someone/conll-like", "split": "train"}
    study = write_study(tmp_path, str(tiny_model), {**tiny_corpus, "train": hub})
    code, out, err = run_in_process(study_command(study, tmp_path, "--dry-run"))
    assert code == 0, err[-2000:]
    read = [line for line in out.splitlines() if line.startswith("  data: ")]
    assert len(read) == 1 and read[0].startswith("  data: not read here (data.train.hf: "), out
    assert "someone/conll-like" in read[0] and "ConnectionError" in read[0], read
    code, out, err = run_in_process(study_command(study, tmp_path))
    assert code == 2 and "cannot load dataset 'someone/conll-like'" in err, err[-2000:]
    assert _written(tmp_path) == []
