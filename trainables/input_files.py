"""Files a user names, opened and read at a bounded cost; every limit on their size is here.

A CoNLL file a study names, a study file and a trial's `--config` file must each be a regular
file: a named pipe (FIFO) would keep the reader waiting for a writer forever, `/dev/zero` never
ends, a folder holds no text. The path is looked up (`stat`) before it is opened, so a device
is never opened, and opened without waiting (`O_NONBLOCK`) and looked up again (`fstat`), so a
path swapped for a FIFO meanwhile is refused too, at once. The size is checked before a byte
is read, and reading stops at the limit even if the file grows meanwhile. A data file is read
a line at a time, each line at most `MAX_LINE_BYTES`, so that a file with no line breaks is
refused at its first line rather than read whole. Each refusal is one line naming the file,
raised as the error type the caller gives (a `DataError` for data, a `SpecError` for a study).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import BinaryIO

from trainables.errors import UserInputError

MiB = 2**20
# a data file (CoNLL): CoNLL-2003's training file is 3 MiB, OntoNotes 5's whole corpus in CoNLL
# columns about 100 MiB; read into sentences, a file costs some ten times its size in memory
MAX_DATA_BYTES = 256 * MiB
# one line of a data file, its line break included: a word and its tags are a few dozen bytes
MAX_LINE_BYTES = 1 * MiB
# a study file or a trial's --config file: the largest shipped study is 5.4 KB, and a file
# within YAML's own limits (trainables/yaml_reading.py: 50,000 values) is far smaller
MAX_SETTINGS_BYTES = 1 * MiB

_NOT_REGULAR = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def size_text(n: int) -> str:
    """A byte count for a message: `1 MiB`, `1.5 GiB`, `812 bytes`; in bytes where one decimal
    would hide the difference from a whole unit (`1,048,577 bytes`, not `1.0 MiB`)."""
    for unit, scale in (("GiB", 2**30), ("MiB", MiB), ("KiB", 2**10)):
        if n >= scale:
            value = n / scale
            if value == int(value):
                return f"{value:.0f} {unit}"
            return f"{n:,} bytes" if f"{value:.1f}".endswith(".0") else f"{value:.1f} {unit}"
    return f"{n} bytes"


def _check(info: os.stat_result, shown: str, what: str, max_bytes: int, error: type) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise error(f"{shown}: is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _NOT_REGULAR if test(info.st_mode)), "not a file")
        raise error(f"{shown}: is {kind}, not a regular file; {what} must be a regular file")
    if info.st_size > max_bytes:
        raise error(
            f"{shown}: {size_text(info.st_size)}, more than the {size_text(max_bytes)} "
            f"{what} may hold"
        )


def open_regular(
    path: str | os.PathLike[str],
    shown: str,
    *,
    what: str,
    max_bytes: int,
    error: type[UserInputError] = UserInputError,
) -> BinaryIO:
    """`path` opened for reading in binary, once it is known to be a regular file of at most
    `max_bytes`; otherwise `error` (one line naming `shown`, the file as the user wrote it).
    `what` names the file in messages ("the data file")."""
    path = Path(path)
    try:
        _check(path.stat(), shown, what, max_bytes, error)  # a device is never opened
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise error(f"{shown}: file not found") from None
    except OSError as err:
        raise error(f"{shown}: cannot read {what}: {err.strerror or err}") from None
    try:
        _check(os.fstat(fd), shown, what, max_bytes, error)  # the path changed meanwhile
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bounded(
    path: str | os.PathLike[str],
    shown: str,
    *,
    what: str,
    max_bytes: int,
    error: type[UserInputError] = UserInputError,
) -> bytes:
    """The bytes of a regular file of at most `max_bytes` (see `open_regular`)."""
    with open_regular(path, shown, what=what, max_bytes=max_bytes, error=error) as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as err:
            raise error(f"{shown}: cannot read {what}: {err.strerror or err}") from None
    if len(data) > max_bytes:  # it grew since it was looked up
        raise error(f"{shown}: more than the {size_text(max_bytes)} {what} may hold")
    return data


def bounded_lines(
    handle: BinaryIO,
    shown: str,
    *,
    what: str,
    max_bytes: int,
    error: type[UserInputError] = UserInputError,
) -> Iterator[tuple[int, bytes]]:
    """The lines of an open file with their 1-based numbers, each at most `MAX_LINE_BYTES`
    (its line break included) and all of them at most `max_bytes`."""
    total = 0
    for lineno in count(1):
        try:
            raw = handle.readline(MAX_LINE_BYTES + 1)
        except OSError as err:
            raise error(f"{shown}: cannot read {what}: {err.strerror or err}") from None
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES:
            raise error(
                f"{shown}:{lineno}: a line of more than {size_text(MAX_LINE_BYTES)}, the most "
                f"one line of {what} may hold (is it a text file with line breaks?)"
            )
        total += len(raw)
        if total > max_bytes:  # it grew since it was looked up
            raise error(f"{shown}: more than the {size_text(max_bytes)} {what} may hold")
        yield lineno, raw
