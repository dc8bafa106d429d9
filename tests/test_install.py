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
import re
import shutil
import site
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from mlflow import MlflowClient

from study.names import LIBRARIES_TAG, RUN_KIND, STUDY_RUN_ID

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
    # what importing threadpoolctl (in another test module) set in this process: a user's
    # shell lacks it, and with it the page's check of what a block leaves set could not fail
    env.pop("KMP_DUPLICATE_LIB_OK", None)
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
    # the console script plans the study as `python -m study.run` does
    planned = _run(installed, tmp_path, "study-run", "ner_depth", "--dry-run")
    assert planned.returncode == 0 and planned.stdout == done.stdout, planned.stderr[-3000:]
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


# The docs' Python API page, its code blocks run in order as one script. Around each block that
# runs a study: what it left changed in the process's environment (another block's may: torch,
# which load_verdicts's ASO loads, sets variables of its own, and MLflow its telemetry session
# when imported, here before any block) and whether Ray still runs; at the end, what it read.
PAGE = REPO / "docs" / "python-api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PROLOGUE = "import os as _os, mlflow as _mlflow, ray as _ray\n_left = []\n"
BEFORE_A_RUN = "_environ = dict(_os.environ)\n"
AFTER_A_RUN = (
    "_left += sorted(set(_os.environ.items()) ^ set(_environ.items()))\n"
    "_left += ['ray still running'] if _ray.is_initialized() else []\n"
)
EPILOGUE = """
import json as _json
print("API-CHECK " + _json.dumps({"rows": len(trials), "run_id": outcome.run_id,
      "uri": outcome.tracking_uri, "left_by_runs": _left, "verdicts": len(verdicts),
      "report": str(outcome.report)}))
"""


@pytest.mark.study
def test_the_api_page_runs_the_smoke_study_from_an_empty_folder(installed, tmp_path):
    """The smoke study, run from an empty folder by the installed package, through the code of
    the Python API page as it stands: it writes its report under the folder's outputs/, its
    tables read back every trial, it leaves the process as it found it, and its MLflow run
    names the libraries the venv ran and the commit the package was built from. The
    `study-run` script is this `run_study` behind the command's parser (its `--help` is run
    above), so one smoke study serves both the install and the page."""
    blocks = BLOCK.findall(PAGE.read_text())
    assert len(blocks) >= 3, "the page's python blocks were not found"
    checked = [
        BEFORE_A_RUN + block + AFTER_A_RUN if "run_study(" in block else block for block in blocks
    ]
    script = tmp_path.parent / f"{tmp_path.name}-page.py"  # beside the folder: it stays empty
    script.write_text(PROLOGUE + "\n".join(checked) + EPILOGUE)
    done = _run(installed, tmp_path, "python", str(script), timeout=900)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    line = next(x for x in done.stdout.splitlines() if x.startswith("API-CHECK "))
    seen = json.loads(line.removeprefix("API-CHECK "))
    report = tmp_path / "outputs" / "reports" / "ner_depth-smoke"
    assert seen["report"] == str(report) and (report / "README.md").is_file()
    assert seen["uri"].endswith(f"{tmp_path / 'outputs' / 'mlflow.db'}"), seen["uri"]
    client = MlflowClient(seen["uri"])  # the store the outcome names is the one it filled
    experiment = client.get_experiment_by_name("ner_depth")
    trial_runs = client.search_runs(
        [experiment.experiment_id],
        filter_string=f"tags.{STUDY_RUN_ID} = '{seen['run_id']}' and tags.{RUN_KIND} = 'trial'",
    )
    assert seen["rows"] == len(trial_runs) == 12  # the smoke plan: 8 explore + 4 confirm
    assert seen["verdicts"] > 0
    assert seen["left_by_runs"] == []
    assert "unknown factor 'epochz'" in done.stdout  # the page's error block
    [study_run] = client.search_runs([experiment.experiment_id], "tags.run_kind = 'study'")
    versions = json.loads(study_run.data.tags[LIBRARIES_TAG])
    assert versions["transformers"] == metadata.version("transformers")  # what the venv ran
    # not a checkout: the commit the package was built from (+dirty: from a changed tree)
    commit = study_run.data.tags["code_version"].removesuffix("+dirty")
    head = (installed.parent.parent / "built_from").read_text()  # the copy's HEAD
    assert len(commit) >= 7 and head.startswith(commit), (commit, head)
