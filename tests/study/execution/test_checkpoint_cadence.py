"""How often a study's trials checkpoint (`phases.confirm.checkpoint_every_s`), through the real
command line, Ray Tune and MLflow: explore's trials under ASHA at every evaluation, since a seed
paused at a rung resumes from its last checkpoint; confirm's, and explore's without ASHA, never
paused, at most once per that many seconds, and always at their final report, which the driver
reads the fingerprint from."""

from __future__ import annotations

import json

import pytest

from tests.study_helpers import run_study, runs_by_kind, write_synthetic_study
from trainables.tune_adapter import CheckpointClock

pytestmark = pytest.mark.study

SURFACE = {"steps_per_epoch": 4}  # 4 evaluations a trial (eval_every 2, 2 epochs), the last final


def _reports(tmp, phase: str) -> list[list[dict]]:
    """Each trial's results as Ray Tune recorded them, in order."""
    files = sorted((tmp / "ray_results").glob(f"*/*/{phase}/*/result.json"))
    return [[json.loads(line) for line in f.read_text().splitlines() if line] for f in files]


def test_trials_never_paused_checkpoint_once_a_while_and_at_the_end(tmp_path):
    """Explore without ASHA as well as confirm. Under ASHA explore's cadence is 0, every
    evaluation (tests/study/spec/test_phases.py), which CheckpointClock(0) keeps (below)."""
    study = write_synthetic_study(
        tmp_path, SURFACE, fixed={"epochs": 2, "eval_every": 2},
        search={"lr": {"type": "loguniform", "low": 1.0e-5, "high": 1.0e-3}},
        phases={"explore": {"samples": 1, "seeds": 1},
                "confirm": {"seeds": 1, "checkpoint_every_s": 3600}},
    )  # fmt: skip
    done = run_study(study, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(runs_by_kind(tmp_path)["trial"]) == 4
    explore, confirm = _reports(tmp_path, "explore"), _reports(tmp_path, "confirm")
    assert len(explore) == 2 and len(confirm) == 2
    once_a_while = [False] * 3 + [True]
    for rows in explore:
        checkpoints = [bool(r["checkpoint_dir_name"]) for r in rows]
        assert checkpoints == once_a_while
    for rows in confirm:
        assert len(rows) == 4 and rows[-1]["final"] == 1.0
        assert [bool(r["checkpoint_dir_name"]) for r in rows] == once_a_while


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("every", [None, 0])
def test_without_a_cadence_every_evaluation_checkpoints(every):
    due = CheckpointClock(every, _Clock())
    assert due() and due()


def test_a_cadence_counts_from_the_start_then_from_the_last_checkpoint():
    clock = _Clock()
    due = CheckpointClock(60, clock)
    clock.now += 59
    assert not due()
    clock.now += 1
    assert due()
    due.reset()
    clock.now += 30
    assert not due()
    clock.now += 30
    assert due()
