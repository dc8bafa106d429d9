"""CoNLL files and the label maps of `data.extra`, through `python -m study.run STUDY` (run by
the command server, tests/study/fuzz/harness.py), which reads and checks a study's data before
it writes anything, stopped where it would start tracking and Ray once every check has passed:
BOM, CRLF, tabs mixed with spaces, `-DOCSTART-`, runs of blank lines, invalid UTF-8, tags
outside BIO, one column; `tag_map` and `unseen` of any form; and files that are no text file
at all: a FIFO, /dev/zero, a folder, a sparse file of 64 GiB. Each case passes the checks, or
is refused with exactly one line on stderr naming the file and its line, or the `data.` field,
and nothing written anywhere under the temporary root."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from tests.study.fuzz.harness import CommandServer, Outcome, check_outcome, fuzz_settings
from tests.study.fuzz.strategies import values

TYPES = ("PER", "LOC", "ORG", "MISC", "geo-loc", "x")
TAGS = st.one_of(
    st.just("O"),
    st.builds("{}-{}".format, st.sampled_from("BI"), st.sampled_from(TYPES)),
    st.sampled_from(["E-PER", "S-LOC", "B-", "I-", "b-per", "BPER", "O-X", "-", "B--", "0"]),
    st.text(min_size=1, max_size=6).filter(lambda t: not t.isspace()),
)
WORDS = st.sampled_from(["john", "paris", "é", "ü", "en:Paris", "-DOCSTART-", ":", "a\u00a0b"])
SEPARATORS = st.sampled_from([" ", "\t", " \t", "\t ", "  "])
word_line = st.builds(
    lambda word, sep, middle, tag: sep.join([word, *middle, tag]),
    WORDS, SEPARATORS, st.lists(st.sampled_from(["NNP", "B-NP", "O"]), max_size=2), TAGS,
)  # fmt: skip
other_line = st.sampled_from(["", " ", "\t", "-DOCSTART- -X- O O", "-DOCSTART-", "john", "\ufeff"])
lines = st.lists(st.one_of(word_line, word_line, other_line), max_size=14)
ENDINGS = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def conll_bytes(draw) -> bytes:
    text = draw(ENDINGS).join(draw(lines)) + draw(st.sampled_from(["", "\n", "\n\n\n"]))
    raw = (draw(st.sampled_from(["", "\ufeff"])) + text).encode("utf-8")
    if raw and draw(st.booleans()):  # a byte that is not UTF-8 somewhere
        at = draw(st.integers(0, len(raw)))
        raw = (
            raw[:at]
            + draw(st.sampled_from([b"\xff", b"\x80", b"\xc3", b"\xed\xa0\x80"]))
            + raw[at:]
        )
    return raw


VALID = b"john B-PER\nlives O\nin O\nparis B-LOC\n\nacme B-ORG\nsays O\n"
SPLITS = ("train", "dev", "test")
FILES = tuple(f"{name}.txt" for name in (*SPLITS, "extra"))
STUDY = "study.yaml"
# a data file and its line, or the data field at fault, alone or at its line of the study
# file, or that line for what no study file may hold (a label map of 5,000 characters)
NAMES_FILE_OR_FIELD = re.compile(
    r"^error: (\S*(train|dev|test|extra)\.txt(:\d+)?: |data\.\S+: "
    rf"|\S*{re.escape(STUDY)}:\d+(:\d+)?: (data\.\S+: |too much for a study file: ))\S"
)
STORAGE = "ray_results"  # where a study that passed its checks would go on to write


def study_text(data: dict) -> bytes:
    """A study of the tiny model on `data` (paths relative to the study file)."""
    study = {
        "description": "data fuzz",
        "model": "tiny",
        "data": data,
        "grid": {"depth": ["full"]},
        "fixed": {"epochs": 1, "lr": 1.0e-4},
        "seeds": 1,
        "phases": {"confirm": {"select": [{}], "seeds": 1}},
    }
    return yaml.dump(study, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True).encode()


def run_study(server: CommandServer, files: dict[str, bytes], data: dict, **options) -> Outcome:
    """`python -m study.run study.yaml` in a folder holding `files`, stopped where it would
    start tracking and Ray."""
    argv = [STUDY, "--storage", STORAGE, "--reports", "none"]
    files = {**files, STUDY: study_text(data)}
    return server.command("study.run", files, argv, stop_at="start", **options)


def check_data(server: CommandServer, contents: dict[str, bytes], extra: dict | None = None):
    data: dict = {split: f"{split}.txt" for split in SPLITS}
    if extra is not None:
        data["extra"] = {"other": {"conll": "extra.txt", **extra}}
    outcome = run_study(server, contents, data)
    check_outcome(outcome, NAMES_FILE_OR_FIELD, writes_on_success=True)
    # a study that passed its checks wrote nothing but its storage's folder, and left no lock
    stray = [path for path in outcome.written if f"/{STORAGE}" not in path]
    assert not stray and not any(".driver.lock" in path for path in outcome.written), stray


@fuzz_settings(0.1)
@given(conll_bytes(), st.sampled_from(FILES[:3]))
@example(b"\xef\xbb\xbfjohn\tB-PER\r\n\r\n\r\n-DOCSTART- O\r\n", "train.txt")
@example(b"john\n", "dev.txt")  # one column
@example(b"john \t B-PER\n", "test.txt")  # tabs mixed with spaces
def test_conll_files(study_command, raw, name):
    """One of the three splits generated, the others valid."""
    check_data(study_command, {**dict.fromkeys(FILES[:3], VALID), name: raw})


type_names = st.one_of(st.sampled_from(TYPES), st.sampled_from(["B-PER", "", " ", "a b"]),
                       st.text(max_size=5), values)  # fmt: skip
tag_maps = st.one_of(st.dictionaries(type_names.filter(lambda v: isinstance(v, str)), type_names,
                                     max_size=4), values)  # fmt: skip


@fuzz_settings(0.05)
@given(
    st.one_of(st.none(), tag_maps),
    st.one_of(st.none(), st.sampled_from(["error", "as_o", "as-o", "O"]), values),
    st.one_of(st.just(b"paris B-geo-loc\nsmith B-x\n"), conll_bytes()),
)
@example({"geo-loc": "LOC"}, "as_o", b"paris B-geo-loc\nsmith B-x\n")
@example({"geo-loc": ["LOC"]}, None, b"paris B-geo-loc\n")
@example(None, {"as_o": 1}, b"paris B-geo-loc\n")
# issue 48: the label map's log line came before the refusal of a type training never shows
@example({}, None, b"paris B-geo-loc\nsmith B-x\n")
def test_label_maps(study_command, tag_map, unseen, raw):
    rules = {
        key: value for key, value in (("tag_map", tag_map), ("unseen", unseen)) if value is not None
    }
    check_data(study_command, {**dict.fromkeys(FILES[:3], VALID), "extra.txt": raw}, rules)


# Files that are no text file. Reading one whole, or waiting on it, is the bug: a FIFO with no
# writer blocks its reader forever, /dev/zero never ends, and 64 GiB is more than this machine
# holds. Each case runs in a process of its own whose address space may grow by ADDED_SPACE
# at most (a reader that reads it all fails there with MemoryError, a traceback, instead of
# filling the machine) and that SIGALRM ends after SPECIAL_TIMEOUT_S (a wait on a FIFO); the
# refusal's own cost is its CPU time and the memory it adds, bounded below.
ADDED_SPACE = 2 * 2**30
SPECIAL_TIMEOUT_S = 30  # of wall time: a wait takes no CPU
SPECIAL_MAX_CPU_S = 5.0  # of CPU time, which a loaded machine does not stretch
SPECIAL_MAX_MIB = 64.0  # memory the refusal may add to the process after its imports
HUGE = 64 * 2**30


def _fifo(folder: Path, name: str) -> str:
    os.mkfifo(folder / name)
    return name


def _dev_zero(folder: Path, name: str) -> str:
    return "/dev/zero"


def _folder(folder: Path, name: str) -> str:
    (folder / name).mkdir()
    return name


def _sparse(folder: Path, name: str) -> str:
    with (folder / name).open("wb") as out:
        out.truncate(HUGE)  # no disk taken: a file of holes
    return name


SPECIAL = {"FIFO": _fifo, "/dev/zero": _dev_zero, "folder": _folder, "64 GiB sparse": _sparse}


@pytest.mark.parametrize("split", [*SPLITS, "extra"])
@pytest.mark.parametrize("kind", SPECIAL)
def test_a_special_or_huge_file_is_one_line_quickly_in_little_memory(study_command, kind, split):
    name = f"{split}.txt"
    with study_command.case_folder(dict.fromkeys(FILES, VALID)) as folder:
        (folder / name).unlink()
        where = SPECIAL[kind](folder, name)
        data: dict = {part: f"{part}.txt" for part in SPLITS}
        data["extra"] = {"other": {"conll": "extra.txt"}}
        if split == "extra":
            data["extra"]["other"]["conll"] = where
        else:
            data[split] = where
        (folder / STUDY).write_bytes(study_text(data))
        outcome = study_command.run(
            "study.run", [STUDY, "--storage", STORAGE, "--reports", "none"], folder,
            stop_at="start", fork=True, address_space=ADDED_SPACE, timeout_s=SPECIAL_TIMEOUT_S,
        )  # fmt: skip
    assert outcome.code == 2, f"exit {outcome.code}: {outcome.err[-3000:]!r}"
    # the file named as the study names it (/dev/zero), or resolved in the study's folder
    check_outcome(outcome, re.compile(rf"^error: (\S*/)?{re.escape(where)}(:\d+)?: \S"))
    assert outcome.cpu_s < SPECIAL_MAX_CPU_S, f"took {outcome.cpu_s:.1f} s of CPU: {outcome}"
    assert outcome.added_mib < SPECIAL_MAX_MIB, f"added {outcome.added_mib:.0f} MiB: {outcome}"
