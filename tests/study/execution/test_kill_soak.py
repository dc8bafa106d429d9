"""The kill soak's short version (bench/kill_soak.py): 300 synthetic trials over 10 arms on a
Ray runtime of a head and two worker nodes, the driver SIGKILLed 3 times at random moments
and resumed after each while one worker node dies; then no trial lost or duplicated in
MLflow, no run left RUNNING, and a report whose tables equal an uninterrupted run's.

The bench is run as its own command, as a person runs it, and its printed counts are read.
Its rule for a driver that ends by itself (a crash between kills fails the soak, it is not
resumed as if it were a kill) is checked on scripted attempts, without Ray, in the default
tier.
"""

from __future__ import annotations

import re
import subprocess
import sys

import kill_soak as kill_soak_script  # bench/kill_soak.py
import pytest
from ray_nodes import ray_unavailable_reason

from tests.study_helpers import REPO

SHORT = ["--trials", "300", "--arms", "10", "--kills", "3", "--seed", "1", "--nodes", "2"]


def _counts(out: str) -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z][\w ]*): (\S+)$", out, flags=re.MULTILINE))


@pytest.mark.slow
@pytest.mark.study
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


class ScriptedDriver:
    """Stands in for kill_soak.Driver: each run ends as the script says."""

    log = "driver.log"

    def __init__(self, kill_soak, script: list[tuple[bool, int | None]]):
        self.attempts = [kill_soak.Attempt(killed, code, 1.0, 0) for killed, code in script]
        self.runs = 0

    def run(self, kill=None, loss=None):
        self.runs += 1
        return self.attempts[self.runs - 1]


@pytest.fixture(scope="module")
def kill_soak():
    return kill_soak_script


def _soak(kill_soak, script, kills=2, resumes=3):
    points = [kill_soak.KillPoint(trials=1)] * kills
    driver = ScriptedDriver(kill_soak, script)
    return kill_soak.soak(driver, points, None, resumes), driver


def test_the_soak_passes_kills_then_a_driver_that_finishes(kill_soak):
    result, driver = _soak(kill_soak, [(True, -9), (True, -9), (False, 0)])
    assert not result.failed and result.kills == 2 and result.resumes == 2 and driver.runs == 3


@pytest.mark.parametrize("code", [1, 2, 3, 130, -11])
@pytest.mark.parametrize("at", [0, 1, 2])
def test_a_driver_that_exits_badly_without_being_killed_fails_the_soak(kill_soak, at, code):
    """A crash between kills (or after the last), whatever its status, is not resumed."""
    script = [(True, -9), (True, -9), (False, 0)]
    script[at] = (False, code)
    result, driver = _soak(kill_soak, script)
    assert f"attempt {at} exited {code} without being killed" in result.failed
    assert driver.runs == at + 1  # not resumed
