"""bench/trainable.py times our loop and the Trainer's in one scope: the steps after the first,
each from the end of the step before, the first step apart, and the same allocator in both."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import trainable

from tests.study_helpers import REPO


def test_the_clock_keeps_the_first_step_apart_and_times_the_rest_as_one_span(monkeypatch):
    wall = iter([10.0, 13.0, 14.5, 16.0])  # start, then the end of steps 1, 2 and 3
    cpu = iter([1.0, 2.0, 2.5, 3.25])
    monkeypatch.setattr(trainable.time, "perf_counter", lambda: next(wall))
    monkeypatch.setattr(trainable.time, "process_time", lambda: next(cpu))
    clock = trainable.StepClock()
    clock.start()
    for _ in range(3):
        clock.step_end()
    # a fourth batch, collated ahead by a data loader, is not a step of this run
    result = clock.result([100, 20, 30, 999])
    assert result == {
        "first_step_seconds": 3.0,
        "first_step_tokens": 100,
        "seconds": 3.0,
        "cpu_seconds": 1.25,
        "tokens": 50,
        "timed_steps": 2,
    }


def test_one_step_is_no_span(monkeypatch):
    clock = trainable.StepClock()
    clock.start()
    clock.step_end()
    with pytest.raises(RuntimeError, match="at least 2"):
        clock.result([10])
    monkeypatch.setattr(sys, "argv", ["trainable.py", "--steps", "1"])
    with pytest.raises(SystemExit) as exited:  # refused on the command line, before any run
        trainable.main()
    assert exited.value.code == 2


@pytest.mark.slow  # MiniLM in two processes, a few steps each
@pytest.mark.parametrize("variant", ["ours", "trainer"])
def test_both_loops_report_the_same_scope(variant, tmp_path):
    """Each loop's child times steps 2..N (the Trainer through its on_step_end callback, once
    per optimizer step) and the first apart, and keeps its freed heap (glibc)."""
    steps = 3
    command = [sys.executable, str(REPO / "bench" / "trainable.py"), "--variant", variant,
               "--precision", "fp32", "--steps", str(steps), "--threads", "1",
               "--eval-passes", "1", "--scratch", str(tmp_path)]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    assert result["timed_steps"] == steps - 1 and result["steps"] == steps
    assert result["first_step_seconds"] > 0 and result["seconds"] > 0
    assert result["tokens"] > 0 and result["first_step_tokens"] > 0
    assert result["heap_kept"] is True  # Linux with glibc, as CI
    assert set(result) >= {"eval_tokens", "eval_seconds", "peak_rss_mb"}
