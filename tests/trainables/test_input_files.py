"""Files a user names are read only when they are regular files, within the limits of
trainables/input_files.py; text a user wrote is printed with its control characters escaped
(trainables.errors.printable). The costly cases, measured in a child process, are in
tests/study/test_input_costs.py; these are the small ones, in-process, a FIFO under an alarm
so that a regression fails instead of hanging."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest

from trainables.data.sources.conll import read_conll
from trainables.errors import DataError, UserInputError, joined, printable
from trainables.input_files import (
    MAX_LINE_BYTES,
    MAX_SETTINGS_BYTES,
    bounded_lines,
    open_regular,
    read_bounded,
    size_text,
)
from trainables.yaml_reading import MAX_NODES, YamlLimitError, load_yaml


@contextlib.contextmanager
def within(seconds: int):
    def expired(*_):
        raise TimeoutError(f"still waiting after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    fifo = tmp_path / "train.txt"
    os.mkfifo(fifo)
    with within(5), pytest.raises(DataError, match=r"train\.txt: is a named pipe \(FIFO\)"):
        read_conll(fifo)


def test_a_device_and_a_folder_are_refused(tmp_path):
    with pytest.raises(DataError, match="/dev/zero: is a character device, not a regular file"):
        read_conll("/dev/zero")
    with pytest.raises(DataError, match="is a folder, not a file"):
        read_conll(tmp_path)
    with pytest.raises(DataError, match="nope.txt: file not found"):
        read_conll(tmp_path / "nope.txt")


def test_a_line_at_the_limit_reads_and_one_byte_more_is_refused(tmp_path):
    word = "w" * (MAX_LINE_BYTES - len(" O\n"))
    path = tmp_path / "long.txt"
    path.write_text(f"a O\n\n{word} O\n")
    assert read_conll(path)[1].words == (word,)
    path.write_text(f"a O\n\n{word}w O\n")
    with pytest.raises(DataError, match=r"long\.txt:3: a line of more than 1 MiB"):
        read_conll(path)


def test_a_file_over_its_limit_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.yaml"
    with path.open("wb") as out:
        out.truncate(MAX_SETTINGS_BYTES + 1)
    with pytest.raises(UserInputError, match=r"big\.yaml: 1,048,577 bytes, more than the 1 MiB"):
        read_bounded(path, "big.yaml", what="a study file", max_bytes=MAX_SETTINGS_BYTES)
    with path.open("wb") as out:
        out.truncate(MAX_SETTINGS_BYTES)
    assert len(read_bounded(path, "x", what="x", max_bytes=MAX_SETTINGS_BYTES)) == 2**20


def test_lines_stop_at_the_byte_limit_when_the_file_grew(tmp_path):
    path = tmp_path / "grew.txt"
    path.write_text("a O\n" * 10)
    with open_regular(path, "grew.txt", what="a data file", max_bytes=40) as handle:
        lines = bounded_lines(handle, "grew.txt", what="a data file", max_bytes=20)
        with pytest.raises(UserInputError, match="more than the 20 bytes a data file may hold"):
            list(lines)


def test_a_trial_config_is_read_within_its_limits(tmp_path):
    from trainables.__main__ import read_settings

    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    with within(5), pytest.raises(UserInputError, match="--config .*config.yaml: is a named pipe"):
        read_settings(str(fifo), [])
    big = tmp_path / "big.yaml"
    big.write_text("- x\n" * (MAX_SETTINGS_BYTES // 4 + 1))
    with pytest.raises(UserInputError, match="more than the 1 MiB a trial's settings file"):
        read_settings(str(big), [])


def test_yaml_values_are_counted_before_a_node_is_built():
    with pytest.raises(YamlLimitError, match=f"more than {MAX_NODES} values") as caught:
        load_yaml("- x\n" * (MAX_NODES + 10))
    assert caught.value.problem_mark.line + 1 == MAX_NODES  # the list itself is a value too
    assert len(load_yaml("- x\n" * (MAX_NODES - 1))) == MAX_NODES - 1


def test_size_text():
    assert [size_text(n) for n in (812, 2**10, 3 * 2**19, 2**31, 2**20 + 1)] == [
        "812 bytes", "1 KiB", "1.5 MiB", "2 GiB", "1,048,577 bytes"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("red \x1b[31mtext\x1b[0m", r"red \x1b[31mtext\x1b[0m"),
        ("bell \a, backspace \b, return \r", r"bell \x07, backspace \x08, return \r"),
        ("C1 \x9b and \x85, DEL \x7f", r"C1 \x9b and \x85, DEL \x7f"),
        ("bidi \u202eevil", r"bidi \u202eevil"),
        ("café, 東京, a\u00a0b", "café, 東京, a\u00a0b"),  # printable, and a no-break space
    ],
)
def test_printable_escapes_controls_only(text, shown):
    assert printable(text) == shown


def test_printable_keeps_lines_when_asked_and_joined_escapes():
    assert printable("a\n\tb\x1b", lines=True) == "a\n\tb\\x1b"
    assert printable("a\n\tb") == r"a\n\tb"
    assert joined("x \x1b[2J\n y\a") == r"x \x1b[2J y\x07"


def test_a_path_with_control_characters_is_escaped_in_its_error(tmp_path):
    path = Path(tmp_path) / "\x1b[31mred.txt"
    with pytest.raises(DataError) as caught:
        read_conll(path)
    assert "\x1b" in str(caught.value)  # the error keeps the value; printing escapes it
    assert r"\x1b[31mred.txt: file not found" in joined(caught.value)
