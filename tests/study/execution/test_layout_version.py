"""A study saved by code with another module layout is refused on `--resume`: Tune pickles its
searcher, scheduler and callbacks by module path, and no old module name is kept importable.
The state records the layout it was saved under; one line, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from study.execution.state import (
    LAYOUT_KEY,
    LAYOUT_VERSION,
    STATE_FILE,
    study_folder,
    write_state,
)
from study.execution.storage import StudyStore
from tests.study_helpers import run_in_process, study_command, write_study
from trainables.errors import UserInputError


def _saved(store: StudyStore, state: dict) -> str:
    """A state file as some driver, of this code or another, wrote it."""
    folder = "teststudy/default-20260101-000000"
    (Path(store.root) / folder).mkdir(parents=True)
    (Path(store.root) / folder / STATE_FILE).write_text(json.dumps(state))
    return folder


def test_a_new_study_records_the_layout_and_resumes_under_it(tmp_path):
    store = StudyStore(str(tmp_path))
    folder, state = study_folder(store, "teststudy", "default", resume=False)
    assert state.layout == LAYOUT_VERSION
    write_state(store, folder, state)
    assert json.loads((tmp_path / folder / STATE_FILE).read_text())[LAYOUT_KEY] == LAYOUT_VERSION
    assert study_folder(store, "teststudy", "default", resume=True) == (folder, state)


@pytest.mark.parametrize("layout", [None, LAYOUT_VERSION - 1, LAYOUT_VERSION + 1])
def test_another_or_no_layout_is_refused(tmp_path, layout):
    store = StudyStore(str(tmp_path))
    state = {"invocation": "abc"} | ({} if layout is None else {LAYOUT_KEY: layout})
    _saved(store, state)
    shown = "unrecorded" if layout is None else str(layout)
    with pytest.raises(UserInputError, match=f"another module layout \\(layout {shown}, "):
        study_folder(store, "teststudy", "default", resume=True)


def test_the_command_line_refuses_it_in_one_line_and_writes_nothing(
    tmp_path, tiny_model, tiny_corpus
):
    study = write_study(tmp_path, str(tiny_model), tiny_corpus)
    store = StudyStore(str(tmp_path / "ray_results"))
    folder = tmp_path / "ray_results" / _saved(store, {"invocation": "abc", "overrides": []})
    before = (folder / STATE_FILE).read_text()
    code, _, err = run_in_process(study_command(study, tmp_path, "--resume"))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: --resume: ") and "another module layout" in lines[0]
    assert not (tmp_path / "mlflow.db").exists()
    assert [p.name for p in folder.iterdir()] == [STATE_FILE]
    assert (folder / STATE_FILE).read_text() == before
