"""CoNLL files and the label maps of `data.extra`, through `load_checked_splits`, the check
`python -m study.run` makes of a study's data before it writes anything (and every trial reads
its data with): BOM, CRLF, tabs mixed with spaces, `-DOCSTART-`, runs of blank lines, invalid
UTF-8, tags outside BIO, one column; `tag_map` and `unseen` of any form. Each case reads, or is
refused in one line naming the file and its line, or the `data.` field."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from tests.study.fuzz.harness import (
    case_folder,
    check_outcome,
    fuzz_settings,
    run_entry,
    user_error_outcome,
)
from tests.study.fuzz.strategies import values
from trainables.data.sources import load_checked_splits

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
FILES = ("train.txt", "dev.txt", "test.txt", "extra.txt")
# a file and its line, or the data field at fault
NAMES_FILE_OR_FIELD = re.compile(r"^error: (\S*(train|dev|test|extra)\.txt(:\d+)?|data\.\S+):")


def check_data(contents: dict[str, bytes], extra: dict | None = None) -> None:
    with case_folder() as folder:
        for name, raw in contents.items():
            (folder / name).write_bytes(raw)
        data = {split: str(folder / f"{split}.txt") for split in ("train", "dev", "test")}
        if extra is not None:
            data["extra"] = {"other": {"conll": str(folder / "extra.txt"), **extra}}
        entry = lambda: user_error_outcome(lambda: load_checked_splits(data))  # noqa: E731
        outcome = run_entry(entry, folder)
    check_outcome(outcome, NAMES_FILE_OR_FIELD)


@fuzz_settings(0.1)
@given(conll_bytes(), st.sampled_from(FILES[:3]))
@example(b"\xef\xbb\xbfjohn\tB-PER\r\n\r\n\r\n-DOCSTART- O\r\n", "train.txt")
@example(b"john\n", "dev.txt")  # one column
@example(b"john \t B-PER\n", "test.txt")  # tabs mixed with spaces
def test_conll_files(raw, name):
    """One of the three splits generated, the others valid."""
    check_data({**dict.fromkeys(FILES[:3], VALID), name: raw})


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
def test_label_maps(tag_map, unseen, raw):
    rules = {
        key: value for key, value in (("tag_map", tag_map), ("unseen", unseen)) if value is not None
    }
    check_data({**dict.fromkeys(FILES[:3], VALID), "extra.txt": raw}, rules)


def test_a_folder_for_a_file_is_one_line(tmp_path: Path):
    (tmp_path / "train.txt").mkdir()
    data = {split: str(tmp_path / f"{split}.txt") for split in ("train", "dev", "test")}
    outcome = run_entry(lambda: user_error_outcome(lambda: load_checked_splits(data)), tmp_path)
    check_outcome(outcome, NAMES_FILE_OR_FIELD)
    assert outcome.code == 2
