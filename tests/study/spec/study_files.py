"""A valid study on the tiny model, written as a file, and the check every one-line study-file
error in this folder's tests passes: file and line first, one line, pointing at the line at fault.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from study import spec
from study.spec import SpecError, load_study

# One bad-study case: (id, edits as {dotted path: value} or a function, what the message says,
# the stripped text of the line it must point at, or None where it points at no line).
BadCase = tuple[str, "dict | Callable[[dict], None]", str, "str | None"]


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


def error_line(err: Exception, path: Path) -> int:
    message = str(err)
    assert "\n" not in message, message
    match = re.match(re.escape(spec.display_path(path)) + r":(\d+): ", message)
    assert match, message
    return int(match.group(1))


def bad_cases(table: list[BadCase]) -> list:
    """The table as pytest parameters (edits, expected, line_text), each named by its id."""
    return [pytest.param(*case[1:], id=case[0]) for case in table]


def one_line_error_test(table: list[BadCase]):
    """A test of every case in `table`: each study, once edited, fails with its one-line error."""

    @pytest.mark.parametrize(("edits", "expected", "line_text"), bad_cases(table))
    def test(tmp_path, study, edits, expected, line_text):
        assert_one_line_error(tmp_path, study, edits, expected, line_text)

    return test


def assert_one_line_error(tmp_path: Path, study: dict, edits, expected: str, line_text) -> None:
    """Apply `edits` to a copy of `study`, load it, and check the one-line error it gives."""
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
