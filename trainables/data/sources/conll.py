"""CoNLL/BIO files: `PATH` or `{conll: PATH, strip_lang_prefix: bool}` in a `data:` entry.

Every sentence keeps an `origin` of `file:line`, so any later complaint about it tells the user
where to look; I/O, encoding and format problems surface as one-line `DataError`s rather than
tracebacks from deep inside a parser.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainables.data.sources._kinds import SplitSource
from trainables.data.tags import check_tag, shortened, to_iob2
from trainables.data.types import TaggedSentence
from trainables.errors import ConfigError, DataError
from trainables.input_files import MAX_DATA_BYTES, bounded_lines, open_regular
from trainables.yaml_reading import bool_word

DOCSTART = "-DOCSTART-"  # a document boundary in CoNLL-2003 and its descendants, not a sentence
_LANG_PREFIX = re.compile(r"[a-z]{2,3}:(?=.)")
_COLUMN_SEPARATOR = re.compile(r"[ \t]+")


@dataclass(frozen=True)
class ConllSource(SplitSource):
    key = "conll"
    forms = ("a CoNLL file path", "{conll: PATH}")
    entry_keys = {
        "conll": "a path (relative to the study file): a CoNLL/BIO file, the tag in the last "
        "column; a bare path means the same",
        "strip_lang_prefix": "true or false (default): drop WikiANN's `xx:` language prefix "
        "from every word",
    }
    reads_bare_paths = True

    path: str
    strip_lang_prefix: bool = False

    @classmethod
    def from_entry(cls, entry: Any, where: str) -> ConllSource:
        if isinstance(entry, str):
            return cls(entry)
        flag = entry.get("strip_lang_prefix")  # text: yes/no/on/off (trainables/yaml_reading.py)
        strip = bool_word(flag) if isinstance(flag, str) else bool(flag)
        if strip is None:
            raise ConfigError(f"data.{where}.strip_lang_prefix: {flag!r} is not allowed: "
                              "true or false (or yes/no, on/off)")  # fmt: skip
        return cls(entry["conll"], strip)

    def sentences(self) -> list[TaggedSentence]:
        return read_conll(self.path, strip_lang_prefix=self.strip_lang_prefix)

    def files(self) -> list[Path]:
        return [Path(self.path)]


def read_conll(
    path: str | os.PathLike[str], *, strip_lang_prefix: bool = False
) -> list[TaggedSentence]:
    """Read a CoNLL/BIO file: one `word ... tag` line per word, blank lines between sentences.

    Only the first (word) and last (tag) columns are used, so CoNLL-2003's `word POS chunk
    tag`, WikiANN's `en:word<TAB>tag` and plain two-column files all read the same way.
    Whitespace-only lines count as separators because real files (the embedded WNUT-16 one
    among them) separate sentences with a lone tab. `strip_lang_prefix` removes WikiANN's
    per-word `xx:` language tag, which would otherwise poison sub-word tokenisation.
    """
    shown = os.fspath(path)
    lines = _numbered_lines(Path(path).expanduser(), shown)
    sentences = list(_parse_conll(lines, shown, strip_lang_prefix))
    if not sentences:
        raise DataError(
            f"{shown}: no sentences found (expected 'word ... tag' lines with a blank line "
            "between sentences)"
        )
    return sentences


def _strip_lang_prefix(word: str) -> str:
    """`en:Paris` -> `Paris`; leaves `:`, `::` and `a:b` alone because they carry no prefix."""
    match = _LANG_PREFIX.match(word)
    return word[match.end() :] if match else word


def _numbered_lines(path: Path, shown: str) -> Iterator[tuple[int, str]]:
    """Lines with 1-based numbers; I/O and encoding failures become one-line DataErrors, and
    so do a path that is not a regular file, a file over `MAX_DATA_BYTES` and a line over
    `MAX_LINE_BYTES` (trainables/input_files.py), before they cost more than that.

    Lines are decoded one by one so a bad byte is reported at its own line, not at wherever
    a buffered text reader happened to be.
    """
    bounds = {"what": "a data file", "max_bytes": MAX_DATA_BYTES, "error": DataError}
    with open_regular(path, shown, **bounds) as handle:
        for lineno, raw in bounded_lines(handle, shown, **bounds):
            yield lineno, _decode(raw, lineno == 1, f"{shown}:{lineno}")


def _decode(raw: bytes, first: bool, where: str) -> str:
    try:
        return raw.decode("utf-8-sig" if first else "utf-8").rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise DataError(f"{where}: not UTF-8 text ({err.reason} at byte {err.start})") from None


def _columns(line: str, where: str) -> list[str]:
    columns = _COLUMN_SEPARATOR.split(line.strip(" \t\r\n"))
    if len(columns) < 2:
        raise DataError(
            f"{where}: expected at least 2 columns (word and tag), got 1: {shortened(columns[0])}"
        )
    return columns


def _parse_conll(
    lines: Iterable[tuple[int, str]], shown: str, strip_lang_prefix: bool
) -> Iterator[TaggedSentence]:
    """Group word lines into sentences; a blank line or a `-DOCSTART-` line closes one."""
    words: list[str] = []
    tags: list[str] = []
    first_line = 0
    for lineno, line in lines:
        if line.isspace() or not line or line.lstrip(" \t").startswith(DOCSTART):
            if words:
                origin = f"{shown}:{first_line}"
                yield TaggedSentence(tuple(words), to_iob2(tags, origin), origin)
                words, tags = [], []
            continue
        where = f"{shown}:{lineno}"
        columns = _columns(line, where)
        check_tag(columns[-1], where)
        word = _strip_lang_prefix(columns[0]) if strip_lang_prefix else columns[0]
        if not words:
            first_line = lineno
        words.append(word)
        tags.append(columns[-1])
    if words:
        origin = f"{shown}:{first_line}"
        yield TaggedSentence(tuple(words), to_iob2(tags, origin), origin)
