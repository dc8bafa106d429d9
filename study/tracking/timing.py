"""How long each call the driver makes to the tracking store takes, for bench/scale.py.

When the environment names a file in `STUDY_TRACKING_TIMES`, `timed(client)` wraps the MLflow
client so that every call is timed, and the times are appended to that file as
`method<TAB>seconds` lines when the process exits. Otherwise (always, outside the benchmark)
the client is returned as it is and nothing is added to any call.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from typing import Any

ENV = "STUDY_TRACKING_TIMES"

_times: list[tuple[str, float]] = []
_lock = threading.Lock()
_registered = False


def timed(client: Any) -> Any:
    """`client`, timed when the environment asks for it."""
    global _registered
    path = os.environ.get(ENV)
    if not path:
        return client
    with _lock:
        if not _registered:
            atexit.register(_write, path)
            _registered = True
    return _TimedClient(client)


class _TimedClient:
    """Forwards every attribute to the client; a method call is timed on its way."""

    def __init__(self, client: Any):
        self._client = client

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                _times.append((name, time.perf_counter() - started))

        return call


def _write(path: str) -> None:
    with _lock, open(path, "a") as out:
        out.writelines(f"{name}\t{seconds:.6f}\n" for name, seconds in _times)
        _times.clear()


def read_times(path: str) -> dict[str, list[float]]:
    """The seconds of each timed call in a file `timed` wrote, by method name."""
    out: dict[str, list[float]] = {}
    with open(path) as lines:
        for line in lines:
            name, _, seconds = line.rstrip("\n").partition("\t")
            out.setdefault(name, []).append(float(seconds))
    return out
