"""The command server (tests/command_server.py) runs a command as the command's own process
would: representative refusals, fixed and drawn by hypothesis, each run three ways, inline in
the server (as most fuzz cases run), in a child the server forks, and as a real
`python -m study.run` process started from nothing, all in the same folder; the same exit
status and the same bytes on stdout and on stderr each way, and nothing written.

A real process spends seconds on its imports, so only these few cases run as one, side by
side, in the slow tier; the default tier runs the trial command inline and forked."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import pytest
from hypothesis import find, settings

from tests.command_server import changes, command_env, snapshot
from tests.study.fuzz.harness import RANDOM, check_outcome
from tests.study.fuzz.test_study_files import FILE, STUDIES, dumped, mutated_study

REAL_TIMEOUT_S = 600  # a real process's imports, on a loaded machine
VALID = b"john B-PER\nlives O\n\nparis B-LOC\n"

SPLITS = {"train": VALID, "dev": b"john\n", "test": VALID}  # dev: one column
# (files, argv): a study file's unknown key, at its line; a data file of one column, refused
# by the real command (not a dry run: after its logging is set up and its lock taken)
FIXED = [
    ({FILE: dumped({**STUDIES["smoke"], "seedz": 2}).encode()}, [FILE, "--dry-run"]),
    (
        {
            **{f"{split}.txt": text for split, text in SPLITS.items()},
            FILE: dumped({**STUDIES["smoke"], "data": {s: f"{s}.txt" for s in SPLITS}}).encode(),
        },
        [FILE, "--profile", "smoke", "--storage", "ray_results", "--reports", "none"],
    ),
]


def _refused(server, files, argv) -> bool:
    return server.command("study.run", files, argv, fork=False).code == 2


def drawn(server) -> list[tuple[dict, list[str]]]:
    """A refused mutated study file, found by hypothesis (the same one every run, unless
    FUZZ_RANDOM)."""
    found = settings(derandomize=not RANDOM, database=None, max_examples=200, deadline=None)

    def as_case(case):
        text, profile = case
        return {FILE: text.encode()}, [FILE, "--profile", profile, "--dry-run"]

    study = find(mutated_study(), lambda case: _refused(server, *as_case(case)), settings=found)
    return [as_case(study)]


@pytest.mark.slow  # three real processes' imports: seconds of the default tier's fuzz budget
def test_inline_forked_and_real_processes_give_the_same_bytes(study_command):
    cases = [*FIXED, *drawn(study_command)]
    with contextlib.ExitStack() as stack:
        folders = [stack.enter_context(study_command.case_folder(files)) for files, _ in cases]
        outcomes = []
        for folder, (_, argv) in zip(folders, cases, strict=True):
            inline = study_command.run("study.run", argv, folder, fork=False, stop_at="start")
            forked = study_command.run("study.run", argv, folder, fork=True, stop_at="start")
            assert inline.code == 2, (argv, inline)  # a refusal, before the start
            check_outcome(inline)
            outcomes.append((inline, forked))
        before = snapshot(study_command.root)
        env = command_env(study_command.root)
        real = [
            subprocess.Popen(
                [sys.executable, "-m", "study.run", *argv],
                cwd=folder,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for folder, (_, argv) in zip(folders, cases, strict=True)
        ]
        ended = [process.communicate(timeout=REAL_TIMEOUT_S) for process in real]
        written = changes(before, snapshot(study_command.root))
    assert not written, f"the real processes wrote {written}"
    for (_, argv), (inline, forked), process, (out, err) in zip(
        cases, outcomes, real, ended, strict=True
    ):
        seen = {
            "real": (process.returncode, out, err),
            "forked": (forked.code, forked.out, forked.err),
            "inline": (inline.code, inline.out, inline.err),
        }
        assert len(set(seen.values())) == 1, (argv, seen)


def test_a_trial_command_inline_and_forked_agree(trial_command):
    """`python -m trainables` (a real process imports torch: too slow to start here)."""
    files = {"trial.yaml": b"lr: [1, 2]\nepochs: 2\n"}
    argv = ["--config", "trial.yaml", "--set=batch_size=null"]
    with trial_command.case_folder(files) as folder:
        seen = [
            trial_command.run("trainables.__main__", argv, folder, fork=fork, stop_at="trial")
            for fork in (False, True)
        ]
    assert seen[0].code == 2 and check_outcome(seen[0])
    assert (seen[0].code, seen[0].out, seen[0].err) == (seen[1].code, seen[1].out, seen[1].err)
