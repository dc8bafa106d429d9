"""A local study's trial workers run trial after trial (`reuse_actors`, study/execution/tuner.py):
a worker process pays its imports (torch, transformers: seconds) for its first trial only.
Read from Ray Tune's own records (each trial's result.json: its worker's pid and, in its first
report, the seconds since its worker began it) of the shared finished study (tests/conftest.py:
explore and confirm of 2 arms on a local Ray of 2 CPUs, one trial per CPU)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.study


def _first_reports(tmp: Path) -> dict[str, list[dict]]:
    """Each experiment's trials' first reports (an experiment is a phase, or a confirm round)."""
    out: dict[str, list[dict]] = defaultdict(list)
    for path in sorted((tmp / "ray_results").glob("*/*/*/*/result.json")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line]
        if rows:
            out[path.parent.parent.name].append(rows[0])
    return out


def test_a_worker_runs_trial_after_trial_and_imports_once(finished_study):
    tmp, _ = finished_study
    experiments = _first_reports(tmp)
    assert {"explore", "confirm"} <= set(experiments), sorted(experiments)
    for name, firsts in experiments.items():
        by_worker: dict[int, list[dict]] = defaultdict(list)
        for first in sorted(firsts, key=lambda r: r["timestamp"]):
            by_worker[first["pid"]].append(first)
        # 2 at a time: a fresh worker for each trial would give as many pids as trials
        assert len(by_worker) <= 2 < len(firsts), (name, sorted(by_worker))
        if name == "explore":  # an ASHA-paused seed resumes wherever a worker is free
            continue
        # a worker may run one trial while the other runs the rest (its cold trial ran
        # longer); each worker that ran several paid its imports for the first one only
        for pid, trials in by_worker.items():
            cold, *warm = (t["time_total_s"] for t in trials)
            # the worker's first trial imported torch and transformers before it reported;
            # the later ones found them imported
            assert all(w < cold for w in warm), (name, pid, cold, warm)
