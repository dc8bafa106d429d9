"""Nothing outside its folders, MLflow's telemetry included: importing MLflow writes
~/.config/mlflow/telemetry.json unless telemetry is off, so every entry point that imports
MLflow (the driver, the report, the export, the Python API's reader) turns it off first,
in one place (`study/__init__.py`), and a user's own setting wins."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.study_helpers import REPO

ENTRY_POINTS = ["study.run", "study.report.__main__", "study.export.__main__", "study.results"]


def _import_with_home(tmp_path, code: str, **env: str) -> list[str]:
    home = tmp_path / "home"
    home.mkdir()
    # A user's shell, not a test's: MLflow keeps its telemetry off under pytest
    # (PYTEST_CURRENT_TEST) and wherever a CI variable (CI, GITHUB_ACTIONS, ...) or DO_NOT_TRACK
    # is set, so the process gets only the search path and the locale.
    clean = {k: v for k, v in os.environ.items() if k in {"PATH", "LANG", "TMPDIR"}}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={**clean, "HOME": str(home), **env}, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    # MLflow's files only: matplotlib keeps its font cache under ~/.cache as everywhere
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if "mlflow" in str(p))


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_an_entry_point_that_imports_mlflow_writes_nothing_in_home(tmp_path, module):
    code = f"import {module}, mlflow; print(mlflow.__version__)"
    assert _import_with_home(tmp_path, code) == []


def test_mlflow_alone_does_write_there_and_a_users_setting_wins(tmp_path):
    """The check above can fail: MLflow imported first writes its telemetry file; and a user
    who turns telemetry on keeps it on through the package."""
    (tmp_path / "a").mkdir()
    written = _import_with_home(tmp_path / "a", "import mlflow")
    assert ".config/mlflow/telemetry.json" in written, written
    code = "import os, study; print(os.environ['MLFLOW_DISABLE_TELEMETRY'])"
    home = tmp_path / "b"
    home.mkdir()
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "HOME": str(home),
                               "MLFLOW_DISABLE_TELEMETRY": "false"}, timeout=120)  # fmt: skip
    assert done.stdout.strip() == "false", done.stderr[-2000:]
