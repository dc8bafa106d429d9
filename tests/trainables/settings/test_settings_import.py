"""Importing `trainables.settings`, as the driver does first of all, in a fresh interpreter:
what it loads (`python -X importtime`, every module the import ran) and how long it takes.

The time is the child's CPU time for the import (`time.process_time` around it), the least of
up to three fresh interpreters: wall time on a 2-core CI machine running other tests counts
the other tests too, and an import is CPU-bound once its files are cached. Measured under
load on the development machine: 0.11-0.16 s (wall 0.13-0.26 s); the bound is 0.3 s."""

from __future__ import annotations

import subprocess
import sys

from tests.study_helpers import REPO

# what it must not load: seconds of imports (scipy ~0.7 s, torch more) for names the settings
# never need
HEAVY = ("scipy", "pyarrow", "torch", "transformers")
MOST_CPU_S = 0.3
TRIES = 3
_TIMED = (
    "import time\n"
    "start = time.process_time()\n"
    "import trainables.settings\n"
    "print(time.process_time() - start)\n"
)


def _import_once() -> tuple[float, set[str]]:
    """(CPU seconds of the import, the top-level names of every module it loaded)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _TIMED],
        cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    # each stderr line: `import time: SELF_US | CUMULATIVE_US | <indent>module.name`
    loaded = {
        line.rpartition("|")[2].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return float(done.stdout), loaded


def test_importing_the_settings_loads_no_scipy_pyarrow_or_torch():
    _, loaded = _import_once()
    assert "trainables" in loaded  # the list is read, not empty
    assert sorted(loaded & set(HEAVY)) == []


def test_importing_the_settings_takes_at_most_0_3_s():
    times = []
    for _ in range(TRIES):
        seconds, _ = _import_once()
        times.append(seconds)
        if seconds <= MOST_CPU_S:
            break
    assert min(times) <= MOST_CPU_S, f"CPU seconds of `import trainables.settings`: {times}"
