"""`with-venv` sets up in the checkout and runs its command in the folder it was called from, so
that a relative study file and a study's outputs/ are that folder's, as docs/running.md says."""

from __future__ import annotations

import subprocess

from tests.study_helpers import REPO


def test_the_command_runs_in_the_callers_folder_with_the_checkouts_environment(tmp_path):
    (tmp_path / "here.txt").write_text("x")
    done = subprocess.run(
        [str(REPO / "with-venv"), "python", "-c",
         "import os, sys; print(os.getcwd()); print(sys.prefix); print(open('here.txt').read())"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    cwd, prefix, read = done.stdout.splitlines()
    assert cwd == str(tmp_path) and read == "x"
    assert prefix == str((REPO / ".venv").resolve())
