"""bench/study_overhead.py splits a study's wall time into start-up, trials and the way out by
reading the driver's own log lines. It once matched only one-word logger names after `study.`,
so every line of `study.execution.tuner` and `study.tracking.callback` was missed and the
bench printed "not found"; these lines are made with the driver's own format and loggers."""

from __future__ import annotations

import logging
import time

import pytest
import study_overhead

from study.execution import tuner
from study.progress.log_format import LOG_DATE_FORMAT, LOG_FORMAT
from study.tracking import callback


@pytest.fixture(scope="module")
def overhead():
    return study_overhead


def driver_line(logger: logging.Logger, at: float, message: str) -> str:
    record = logger.makeRecord(logger.name, logging.INFO, __file__, 0, message, None, None)
    record.created = at
    return logging.Formatter(LOG_FORMAT, LOG_DATE_FORMAT).format(record)


def test_timeline_reads_the_phase_and_trial_lines_of_the_drivers_loggers(overhead):
    launched = time.mktime((2026, 11, 27, 10, 0, 0, 0, 0, -1))  # whole seconds: no rounding
    log = "\n".join([
        driver_line(logging.getLogger("study"), launched + 2, "plan: 2 arms; confirm: 4 trials"),
        driver_line(tuner.log, launched + 9, "phase confirm: 4 trials"),
        driver_line(callback.log, launched + 150, "trial finished: [confirm] arm a seed 0"),
        driver_line(callback.log, launched + 301, "trial finished: [confirm] arm b seed 1"),
        driver_line(tuner.log, launched + 302, "phase confirm: trial states {'TERMINATED': 4}"),
    ])  # fmt: skip
    assert overhead.timeline(log, launched, 310.0) == (
        "study timeline (1 s log resolution): start-up 9 s, trials 292 s, after the last trial 9 s"
    )


def test_timeline_says_so_when_the_log_has_no_trial_lines(overhead):
    log = driver_line(tuner.log, time.time(), "phase confirm: 4 trials")
    assert overhead.timeline(log, time.time(), 10.0) == "study timeline: not found in its log"
