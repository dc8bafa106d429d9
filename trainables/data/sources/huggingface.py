"""Hugging Face datasets: `{hf: NAME_OR_PATH, split:, config:, tokens_column:, tags_column:,
revision:}`.

`revision` (a commit, tag or branch of a hub dataset) is passed to `load_dataset(revision=)`
and recorded in the data fingerprint; a local folder has no revisions, and datasets reads it
as it is whatever the revision says.

A name is loaded with `datasets.load_dataset` (where a hub is reachable), a folder written by
`save_to_disk` with `load_from_disk`, any other folder as a data-files dataset. Whatever the
library raises, the user sees one line naming the dataset and the study field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainables.data.sources._kinds import SplitSource
from trainables.data.sources.conll import DOCSTART
from trainables.data.tags import shortened, to_iob2
from trainables.data.types import TaggedSentence
from trainables.errors import DataError
from trainables.hub import cache_only_if_unreachable, unreachable_hint


@dataclass(frozen=True)
class HuggingFaceSource(SplitSource):
    key = "hf"
    forms = ("{hf: NAME_OR_PATH, split: SPLIT}",)
    entry_keys = {
        "hf": "a dataset name (where a hub is reachable) or a local folder: a Hugging Face dataset",
        "split": "a split name (default `train`): which of the dataset's splits",
        "config": "a configuration name: the dataset's configuration (e.g. a WikiANN language)",
        "tokens_column": "a column name (default `tokens`): the words of each sentence",
        "tags_column": "a column name (default `ner_tags`): the tags, as class ids or strings",
        "revision": "a commit, tag or branch, as text: the hub revision of the dataset "
        "(recorded in the fingerprint; a local folder is read as it is)",
    }

    name: str
    split: str = "train"
    tokens_column: str = "tokens"
    tags_column: str = "ner_tags"
    config_name: str | None = None
    where: str = field(default="", compare=False)  # the study field, for messages
    revision: str | None = None

    @classmethod
    def from_entry(cls, entry: Any, where: str) -> HuggingFaceSource:
        revision = entry.get("revision")
        if revision is not None and not isinstance(revision, str):
            raise DataError(f"data.{where}.revision: {revision!r} is not allowed: a commit, tag "
                            "or branch of the dataset, as text (quote a number)")  # fmt: skip
        return cls(
            entry["hf"],
            entry.get("split", "train"),
            entry.get("tokens_column", "tokens"),
            entry.get("tags_column", "ner_tags"),
            entry.get("config"),
            where,
            revision,
        )

    def sentences(self) -> list[TaggedSentence]:
        try:
            return load_hf_dataset(
                self.name,
                self.split,
                tokens_column=self.tokens_column,
                tags_column=self.tags_column,
                config_name=self.config_name,
                revision=self.revision,
            )
        except DataError as err:  # name the study field too: several splits may share a name
            raise DataError(f"data.{self.where}.hf: {err}") from None

    def recorded_names(self) -> list[str]:
        return [f"hf:{self.name}" + (f"@{self.revision}" if self.revision else "")]


def load_hf_dataset(
    name_or_path: str,
    split: str,
    *,
    tokens_column: str = "tokens",
    tags_column: str = "ner_tags",
    config_name: str | None = None,
    revision: str | None = None,
) -> list[TaggedSentence]:
    """Read one split of a Hugging Face dataset (hub name or local folder) as sentences.

    Integer tags are mapped through the column's ClassLabel names so hub datasets such as
    conll2003 work as published; `-DOCSTART-` rows are dropped, as in `read_conll`, so both
    routes to the same corpus give the same sentences.
    """
    dataset = _pick_split(_open_dataset(name_or_path, config_name, revision), name_or_path, split)
    where = f"{name_or_path}[{split}]"
    missing = [c for c in (tokens_column, tags_column) if c not in dataset.column_names]
    if missing:
        available = ", ".join(dataset.column_names) or "none"
        raise DataError(f"{where}: no column {missing[0]!r}; available: {available}")
    sentences = list(_hf_sentences(dataset, where, tokens_column, tags_column))
    if not sentences:
        raise DataError(f"{where}: no sentences found")
    return sentences


def _reason(err: BaseException) -> str:
    """The first line of an exception, so the user sees why without a library traceback."""
    lines = str(err).strip().splitlines()
    text = lines[0] if lines else ""
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _is_saved_to_disk(folder: Path) -> bool:
    """`save_to_disk` folders need `load_from_disk`; `load_dataset` would misread them."""
    return (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file()


def _open_dataset(name_or_path: str, config_name: str | None, revision: str | None) -> Any:
    import datasets  # deferred: importing datasets costs about a second

    local = Path(name_or_path).expanduser()
    unreachable = None
    try:
        if local.is_dir() and _is_saved_to_disk(local):
            return datasets.load_from_disk(str(local))
        with cache_only_if_unreachable(name_or_path) as unreachable:
            return datasets.load_dataset(name_or_path, config_name, revision=revision)
    except Exception as err:  # datasets raises many unrelated types; the user needs one line
        hint = "" if local.exists() else " (no local folder of that name either)"
        hint += unreachable_hint(unreachable)
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
        raise DataError(f"{origin}: expected a list of tags per row, got {shortened(repr(raw))}")
    if names is None:
        if any(not isinstance(t, str) for t in raw):
            raise DataError(
                f"{origin}: tags {shortened(repr(raw))} are neither strings nor ClassLabel ids"
            )
        return list(raw)
    try:
        return [names[t] for t in raw]
    except (IndexError, TypeError):
        raise DataError(
            f"{origin}: tag ids {shortened(repr(raw))} do not fit the {len(names)} ClassLabel names"
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
        if not words or words[0] == DOCSTART:
            continue
        tags = _row_tags(raw, names, origin)
        if len(tags) != len(words):
            raise DataError(f"{origin}: {len(words)} tokens but {len(tags)} tags")
        yield TaggedSentence(tuple(str(w) for w in words), to_iob2(tags, origin), origin)
