"""Every installed command ends through `leaving_quickly`: its process exits without walking
the objects of torch, Ray, MLflow and pandas in a last garbage collection (a second of each
study's, report's or export's wall time). Checked in a fresh process per command, with its
`main` replaced, so neither a study runs nor this test process's collector is touched."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# the installed commands (pyproject.toml's [project.scripts]) of this project's packages
SCRIPTS = {
    e.name: e.value
    for e in entry_points(group="console_scripts")
    if e.value.partition(".")[0] in ("study", "trainables")
}
PROBE = """
import gc, importlib, sys
module = importlib.import_module(sys.argv[1])
module.main = lambda: 7
entry = getattr(module, sys.argv[2])
assert gc.get_freeze_count() == 0, "frozen before the command ended"
print(entry(), gc.get_freeze_count() > 0)
"""


def test_the_four_commands_are_found():
    assert sorted(SCRIPTS) == ["study-export", "study-report", "study-run", "trainables-run"]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_each_command_returns_mains_code_with_the_process_frozen(name):
    module, _, function = SCRIPTS[name].partition(":")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, module, function],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["7", "True"]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_running_the_module_calls_the_same_entry(name):
    module, _, function = SCRIPTS[name].partition(":")
    source = (REPO / (module.replace(".", "/") + ".py")).read_text()
    assert source.rstrip().endswith(f'if __name__ == "__main__":\n    sys.exit({function}())')
