"""A finished study stops the Ray it started while its summary and report are made, not after
them: Ray's shutdown is mostly waiting for its processes to end. It must still be over when the
study returns, and a Ray the process had before the study is left running."""

from __future__ import annotations

import threading

import pytest
import ray

from study.execution import StudyStore, ray_stopped_meanwhile, runtime
from trainables.errors import UserInputError


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


TIMED_OUT = (
    "The current node timed out during startup. This could happen because some of "
    "the raylet failed to startup or the GCS has become overloaded."
)  # Ray's text


def _ray_init_that_times_out(times: int, calls: list):
    """ray.init failing as Ray's node.py does when its node does not register in 30 s (a busy
    machine), `times` times, then succeeding."""

    def init(**kwargs):
        calls.append("init")
        if calls.count("init") <= times:
            raise Exception(TIMED_OUT)  # noqa: TRY002 - Ray raises exactly this

    return init


def test_a_local_ray_that_timed_out_starting_is_started_once_more(monkeypatch):
    calls = []
    monkeypatch.setattr(runtime.ray, "init", _ray_init_that_times_out(1, calls))
    monkeypatch.setattr(runtime.ray, "shutdown", lambda: calls.append("shutdown"))
    runtime._start_local_ray(1, {}, verbose=False)
    assert calls == ["init", "shutdown", "init"]


def test_a_local_ray_that_times_out_twice_is_one_line(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(runtime.ray, "init", _ray_init_that_times_out(2, calls))
    monkeypatch.setattr(runtime.ray, "shutdown", lambda: calls.append("shutdown"))
    monkeypatch.setattr(runtime.ray, "is_initialized", lambda: False)
    with pytest.raises(UserInputError) as refused:
        runtime.start_ray(None, 1, StudyStore(str(tmp_path)))
    assert str(refused.value) == f"cannot start a local Ray: {TIMED_OUT}"
    assert calls == ["init", "shutdown", "init"]


def test_another_error_of_ray_init_is_not_taken_for_a_timeout(monkeypatch, tmp_path):
    def init(**kwargs):
        raise Exception("something else")  # noqa: TRY002

    monkeypatch.setattr(runtime.ray, "init", init)
    monkeypatch.setattr(runtime.ray, "is_initialized", lambda: False)
    with pytest.raises(Exception, match="something else") as raised:
        runtime.start_ray(None, 1, StudyStore(str(tmp_path)))
    assert type(raised.value) is Exception
