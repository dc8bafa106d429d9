"""The driver's state, `study.json`: one typed `StudyState`, read and written by
study/execution/state.py alone. A state round-trips; a file the earlier, untyped driver wrote
resumes with the same values; a file this code cannot read is refused in one line; and no
other module of the project names the file."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from study.execution.state import (
    LAYOUT_VERSION,
    STATE_FILE,
    StudyState,
    read_state,
    study_folder,
    write_state,
)
from study.execution.storage import StudyStore
from tests.study_helpers import REPO
from trainables.errors import UserInputError

FOLDER = "teststudy/default-20260101-000000-abcdef"

# study.json as the driver wrote it before the state was typed (a dict filled by run.py,
# precision.py, tracking/start.py, phases.py and rounds.py, written by json.dumps with
# indent=2 and sorted keys), midway through its second confirm round with reused seeds
UNTYPED_DRIVER_FILE = """{
  "chosen": {
    "depth=5": [
      {
        "lr": 0.000178
      }
    ],
    "depth=6": [
      {
        "lr": 0.0002
      }
    ]
  },
  "confirm_arms": [
    "depth=5"
  ],
  "confirm_rounds": [
    [
      "depth=5",
      "depth=6"
    ]
  ],
  "invocation": "5f0c2d9e8b7a4c3d2e1f0a9b8c7d6e5f",
  "layout": 2,
  "overrides": [
    "fixed.epochs=3"
  ],
  "phases_done": [
    "explore"
  ],
  "precision": "fp32",
  "profile": "default",
  "reused": [
    [
      "depth=5",
      0,
      2
    ]
  ],
  "study_run": "0a1b2c3d4e5f"
}"""


def _write_raw(root: Path, text: str) -> None:
    (root / FOLDER).mkdir(parents=True)
    (root / FOLDER / STATE_FILE).write_text(text)


def test_a_state_reads_back_as_it_was_written(tmp_path):
    store = StudyStore(str(tmp_path))
    state = StudyState(
        "abc", profile="smoke", overrides=["seeds=3"], precision="bf16", study_run="r1",
        phases_done=["explore"], chosen={"a": [{"lr": 1e-4}]}, confirm_rounds=[["a", "b"]],
        confirm_arms=["a"], reused=[("a", 0, 2)],
    )  # fmt: skip
    write_state(store, FOLDER, state)
    assert read_state(store, FOLDER) == state
    assert not list((tmp_path / FOLDER).glob(".*"))  # the temporary file was renamed
    fresh = StudyState.new()  # undecided fields are not written
    write_state(store, FOLDER, fresh)
    saved = json.loads((tmp_path / FOLDER / STATE_FILE).read_text())
    assert set(saved) == {"invocation", "layout", "profile", "overrides", "phases_done",
                          "confirm_rounds"}  # fmt: skip
    assert read_state(store, FOLDER) == fresh


def test_a_file_of_the_untyped_driver_resumes_with_its_values(tmp_path):
    _write_raw(tmp_path, UNTYPED_DRIVER_FILE)
    folder, state = study_folder(StudyStore(str(tmp_path)), "teststudy", "default", resume=True)
    assert folder == FOLDER
    assert state == StudyState(
        invocation="5f0c2d9e8b7a4c3d2e1f0a9b8c7d6e5f", layout=LAYOUT_VERSION, profile="default",
        overrides=["fixed.epochs=3"], precision="fp32", study_run="0a1b2c3d4e5f",
        phases_done=["explore"], chosen={"depth=5": [{"lr": 0.000178}], "depth=6": [{"lr": 2e-4}]},
        confirm_rounds=[["depth=5", "depth=6"]], confirm_arms=["depth=5"],
        reused=[("depth=5", 0, 2)],
    )  # fmt: skip
    # written again, the file holds what it held (the same keys, values and layout)
    write_state(StudyStore(str(tmp_path)), folder, state)
    again = json.loads((tmp_path / FOLDER / STATE_FILE).read_text())
    assert again == json.loads(UNTYPED_DRIVER_FILE)


def test_an_early_file_resumes_with_what_was_not_decided_left_open(tmp_path):
    """Written before the study run was opened: no precision, rounds or samples yet."""
    _write_raw(tmp_path, json.dumps({"invocation": "abc", "layout": LAYOUT_VERSION}))
    _, state = study_folder(StudyStore(str(tmp_path)), "teststudy", "default", resume=True)
    assert state == StudyState("abc")
    assert state.precision is state.chosen is state.confirm_arms is state.reused is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"invocation": "abc", "layout": 2', "is not whole JSON"),
        ("[1, 2]", "holds no study state"),
        ('{"invocation": "abc", "layout": 2, "rounds": []}', "holds 'rounds', which this code"),
        ('{"invocation": "abc", "layout": 2, "phases_done": "explore"}',
         'phases_done is "explore", not what the driver writes'),
        ('{"invocation": "abc", "layout": 2, "reused": [["a", "0", 2]]}', "reused is"),
        ('{"layout": 2}', "has no invocation"),
    ],
)  # fmt: skip
def test_a_file_this_code_cannot_read_is_refused_in_one_line(tmp_path, text, says):
    _write_raw(tmp_path, text)
    with pytest.raises(UserInputError) as refused:
        study_folder(StudyStore(str(tmp_path)), "teststudy", "default", resume=True)
    line = str(refused.value)
    assert says in line and "\n" not in line, line
    assert line.startswith(f"--resume: {tmp_path / FOLDER / STATE_FILE}")
    assert line.endswith("run the study again without --resume")


def test_every_field_says_what_a_saved_value_must_be():
    for field in dataclasses.fields(StudyState):
        assert callable(field.metadata.get("check")), field.name


def _strings_in_code(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module but its docstrings, with its line."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def _names_the_state_file(path: Path) -> list[str]:
    found = [f"{line}: {text!r}" for line, text in _strings_in_code(path) if STATE_FILE in text]
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "study.execution.state":
            named = [a.name for a in node.names if a.name == "STATE_FILE"]
            found += [f"{node.lineno}: imports {name}" for name in named]
    return found


def test_only_the_state_module_names_study_json():
    owner = REPO / "study" / "execution" / "state.py"
    offenders = {
        str(path.relative_to(REPO)): found
        for package in ("study", "trainables", "bench")
        for path in sorted((REPO / package).rglob("*.py"))
        if path != owner and (found := _names_the_state_file(path))
    }
    assert offenders == {}
    assert _names_the_state_file(owner)  # the check sees the name where it is


def test_the_check_finds_a_module_that_opens_the_file(tmp_path):
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text(
        '"""Reads study.json (a docstring may say so)."""\n\n'
        'def peek(folder):\n    return open(f"{folder}/study.json").read()\n'
    )
    assert _names_the_state_file(sneaky) == ["4: '/study.json'"]
