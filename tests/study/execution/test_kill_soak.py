"""The kill soak's short version (bench/kill_soak.py): 300 synthetic trials over 10 arms on a
Ray runtime of a head and two worker nodes, the driver SIGKILLed 3 times at random moments
and resumed after each while one worker node dies; then no trial lost or duplicated in
MLflow, no run left RUNNING, and a report whose tables equal an uninterrupted run's.

The bench is run as its own command, as a person runs it, and its printed counts are read.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.ray_nodes import ray_unavailable_reason
from tests.study_helpers import REPO

pytestmark = [pytest.mark.slow, pytest.mark.study]

SHORT = ["--trials", "300", "--arms", "10", "--kills", "3", "--seed", "1", "--nodes", "2"]


def _counts(out: str) -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z][\w ]*): (\S+)$", out, flags=re.MULTILINE))


def test_a_study_killed_and_resumed_loses_and_duplicates_nothing(tmp_path):
    if ray_unavailable_reason():
        pytest.skip(ray_unavailable_reason())
    done = subprocess.run(
        [sys.executable, "bench/kill_soak.py", *SHORT, "--keep", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    out = done.stdout + done.stderr
    counts = _counts(done.stdout)
    assert counts.get("kills") == "3" and int(counts.get("resumes", 0)) >= 3, out[-3000:]
    assert counts["node losses"] == "1", out[-3000:]
    assert counts["trials planned"] == counts["trials in MLflow"] == "300", out[-3000:]
    assert counts["lost"] == counts["duplicates"] == counts["RUNNING left"] == "0", out[-3000:]
    assert counts["evaluations logged twice"] == "0", out[-3000:]
    assert counts["report equal"] == "yes", out[-3000:]
    assert done.returncode == 0, out[-3000:]
