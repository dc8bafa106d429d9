"""`python -m tests.study.spec.limits_probe KIND ARG...`: one input read the way the project
reads it, for tests/study/spec/test_limits.py, which runs it in a process of its own (forked
by tests/command_server.py) and takes its cost from that process: its peak RSS and its CPU
time, from wait4 once it has ended. So memory that libyaml (C) allocates counts as much as
Python's, which tracemalloc would not see.

Kinds: `study FILE_OR_NAME PROFILE [OVERRIDE...]` (`load_study`), `yaml FILE` (`load_yaml` of
the file's text) and `c_alloc MIB` (MIB of memory from C's malloc, every page written: the
meter's own check). Prints one JSON line: the error raised, as the names of its classes and
its message, or null when nothing was raised.
"""

from __future__ import annotations

import ctypes
import json
import sys

from study.spec import load_study
from trainables.yaml_reading import load_yaml


def _c_alloc(mib: int) -> None:
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    size = mib * 2**20
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)  # pages count in the RSS once written


def main(argv: list[str]) -> None:
    kind, *args = argv
    try:
        if kind == "study":
            load_study(args[0], args[1], overrides=args[2:])
        elif kind == "yaml":
            with open(args[0], encoding="utf-8") as text:
                load_yaml(text.read())
        elif kind == "c_alloc":
            _c_alloc(int(args[0]))
        else:
            raise SystemExit(f"limits_probe: no kind {kind!r}")
    except Exception as err:  # noqa: BLE001 - what it raised is the answer
        classes = [cls.__name__ for cls in type(err).__mro__]
        print(json.dumps({"classes": classes, "message": str(err)}))
        return
    print(json.dumps(None))


if __name__ == "__main__":
    main(sys.argv[1:])
