"""A command whose reader stops early (`python -m study.run --list | head -1`) ends quietly with
a filter's status, 141, not with a BrokenPipeError traceback (trainables/command_line.py
`pipe_closed_quietly`). The reader here closes its end before the command writes anything, so
every write fails: the race that `| head` loses only some of the time, lost every time."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.study_helpers import REPO


@pytest.mark.parametrize(
    "command",
    [
        ["study.run", "--list"],
        ["study.run", "ner_depth", "--profile", "search", "--dry-run"],
    ],
    ids=["list", "dry-run"],
)
def test_a_reader_that_stops_early_ends_the_command_quietly(command):
    process = subprocess.Popen(
        [sys.executable, "-m", *command], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    process.stdout.close()
    err = process.stderr.read()
    assert process.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
