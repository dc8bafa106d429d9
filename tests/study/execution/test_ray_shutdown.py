"""A finished study stops the Ray it started while its summary and report are made, not after
them: Ray's shutdown is mostly waiting for its processes to end. It must still be over when the
study returns, and a Ray the process had before the study is left running."""

from __future__ import annotations

import threading

import ray

from study.execution import StudyStore, ray_stopped_meanwhile, runtime


def test_ray_stops_while_the_last_work_runs_and_is_waited_for(monkeypatch):
    body_ran, stops = threading.Event(), []
    # a shutdown that ends only once the block's work ran: run before the work, it would
    # wait the timeout out and record False; not waited for, it would not be recorded yet
    monkeypatch.setattr(runtime, "stop_ray", lambda: stops.append(body_ran.wait(timeout=30)))
    with ray_stopped_meanwhile(True):
        body_ran.set()
    assert stops == [True]


def test_a_ray_the_process_had_before_is_left_running(monkeypatch):
    monkeypatch.setattr(runtime, "stop_ray", lambda: (_ for _ in ()).throw(AssertionError))
    with ray_stopped_meanwhile(False):
        pass


def test_a_ray_started_here_is_stopped_by_the_end_of_the_block(tmp_path):
    store = StudyStore(str(tmp_path))
    assert not ray.is_initialized()
    assert runtime.start_ray(None, 1, store) is True
    try:
        assert runtime.start_ray(None, 1, store) is False  # already running: not this call's
        with ray_stopped_meanwhile(True):
            pass
        assert not ray.is_initialized()
    finally:
        ray.shutdown()
