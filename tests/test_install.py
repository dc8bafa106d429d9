"""The package as a user installs it: `pip install` of the checkout (not editable) into a fresh
venv, then the study commands from an empty folder outside the checkout.

The fresh venv gets the dependencies already installed for the tests through a `.pth` line (its
own site-packages come first, so the installed `study` and `trainables` win over the checkout's
editable ones, whose import hook a plain path line does not run); only the project itself is
built and installed, offline and without build isolation, from a copy of the checkout's files
as git lists them (a fresh clone: no stale `build/`, no outputs).
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from mlflow import MlflowClient

from study.names import LIBRARIES_TAG

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _checkout_copy(target: Path) -> Path:
    """The checkout's tracked and new (not ignored) files, symlinks kept as links, and its git
    history, from which the build takes the commit it records."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the files to install cannot be listed")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = REPO / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the work tree, not yet in the index
        dest = target / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            dest.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, dest)
    shutil.copytree(REPO / ".git", target / ".git", symlinks=True)
    return target


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The bin/ folder of a fresh venv with the project installed from a copy of the checkout."""
    root = tmp_path_factory.mktemp("install")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(purelib, "test_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    source = _checkout_copy(root / "checkout")
    done = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-build-isolation",
         str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    (root / "built_from").write_text(head)
    return venv / "bin"


def _run(bin_dir: Path, cwd: Path, *command: str, timeout: float = 120):
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_installed_package_holds_the_studies(installed, tmp_path):
    code = "import study, study.spec as s; print(study.__file__); print(s.known_studies())"
    done = _run(installed, tmp_path, "python", "-c", code)
    assert done.returncode == 0, done.stderr
    where, studies = done.stdout.splitlines()
    assert Path(where).is_relative_to(installed.parent), where  # not the checkout's
    assert "ner_depth" in studies and "smoke" in studies
    for package in ("study", "trainables"):  # PEP 561: typed for the users' type checkers
        assert (Path(where).parents[1] / package / "py.typed").is_file()


def test_dry_run_and_help_from_an_empty_folder(installed, tmp_path):
    done = _run(installed, tmp_path, "python", "-m", "study.run", "ner_depth", "--dry-run")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "arms" in done.stdout
    helped = _run(installed, tmp_path, "study-run", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "ner_depth" in helped.stdout and "exit codes" in helped.stdout
    for script in ("study-report", "trainables-run"):
        assert _run(installed, tmp_path, script, "--help").returncode == 0
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing
    docs = _run(installed, tmp_path, "python", "-m", "study.cli_docs", "--check")
    assert docs.returncode == 2 and "installed package" in docs.stderr, docs.stderr
    assert len(docs.stderr.splitlines()) == 1, docs.stderr  # no traceback


def test_own_study_folder_comes_before_the_shipped_one(installed, tmp_path):
    """./search_spaces/NAME.yaml wins over the shipped study of that name."""
    (tmp_path / "search_spaces").mkdir()
    shipped = REPO / "search_spaces" / "smoke.yaml"
    text = shipped.read_text().replace("description:", "description: MINE", 1)
    (tmp_path / "search_spaces" / "smoke.yaml").write_text(text)
    done = _run(installed, tmp_path, "python", "-m", "study.run", "--list")
    assert done.returncode == 0, done.stderr
    assert "MINE" in done.stdout and "ner_depth" in done.stdout


@pytest.mark.study
def test_smoke_study_from_an_empty_folder(installed, tmp_path):
    """The issue's check: the smoke study runs and writes its report under the working
    folder's outputs/."""
    done = _run(installed, tmp_path, "study-run", "ner_depth", "--profile", "smoke",
                "--num-cpus", "2", timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "outputs" / "reports" / "ner_depth-smoke" / "README.md").is_file()
    client = MlflowClient(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ner_depth")
    [study_run] = client.search_runs([experiment.experiment_id], "tags.run_kind = 'study'")
    versions = json.loads(study_run.data.tags[LIBRARIES_TAG])
    assert versions["transformers"] == metadata.version("transformers")  # what the venv ran
    # not a checkout: the commit the package was built from (+dirty: from a changed tree)
    commit = study_run.data.tags["code_version"].removesuffix("+dirty")
    head = (installed.parent.parent / "built_from").read_text()  # the copy's HEAD
    assert len(commit) >= 7 and head.startswith(commit), (commit, head)
