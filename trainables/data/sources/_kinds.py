"""What a kind of data source is, and the registries that defining one fills.

A kind is one subclass, and defining the subclass registers it under its `key`, the word that
names it in a `data:` entry (`{conll: PATH}`, `{hf: NAME}`, `{embedded: wnut16}`). The package
imports every module beside this one, so a new kind is one new module and nothing else: the
loader, its error messages and the fingerprint's inputs all read these registries.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from trainables.data.types import TaggedSentence

SPLIT_KINDS: dict[str, type[SplitSource]] = {}
CORPUS_KINDS: dict[str, type[CorpusSource]] = {}


def _register(kinds: dict[str, Any], kind: type) -> None:
    if "key" not in vars(kind):
        return  # an intermediate base, not a kind a data entry can name
    if kind.key in kinds:  # two modules claiming one key: the second would silently win
        raise TypeError(f"data source key {kind.key!r} is claimed by two kinds")
    kinds[kind.key] = kind


class SplitSource(ABC):
    """One split's sentences, from its entry under `train`, `dev`, `test` or `extra.NAME`."""

    key: ClassVar[str]
    forms: ClassVar[tuple[str, ...]]  # how an entry of this kind is written, for messages
    # the keys of a mapping entry of this kind, `key` first, each with what it takes and is
    # for (docs/study-keys.md, written by study/spec/reference.py)
    entry_keys: ClassVar[dict[str, str]]
    reads_bare_paths: ClassVar[bool] = False  # a plain string entry is a path of this kind

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _register(SPLIT_KINDS, cls)

    @classmethod
    @abstractmethod
    def from_entry(cls, entry: Any, where: str) -> SplitSource:
        """The source an entry describes; `where` is its field (`train`, `extra.NAME`)."""

    @abstractmethod
    def sentences(self) -> list[TaggedSentence]:
        """Read the split: IOB2 tags, each sentence with an origin a message can point at."""

    def files(self) -> list[Path]:
        """Local files whose bytes are the data, for the study's data fingerprint."""
        return []

    def recorded_names(self) -> list[str]:
        """What the fingerprint records as given where the content is not a local file."""
        return []


class CorpusSource(ABC):
    """Train, dev and test at once, named by a top-level `data` key (`{embedded: wnut16}`)."""

    key: ClassVar[str]
    entry_keys: ClassVar[dict[str, str]]  # {key: what it takes and is for}, as a split's

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _register(CORPUS_KINDS, cls)

    @classmethod
    @abstractmethod
    def from_entry(cls, entry: Any) -> CorpusSource:
        """The corpus the value under `data.<key>` names."""

    @abstractmethod
    def splits(self) -> dict[str, list[TaggedSentence]]:
        """`train`, `dev` and `test`, each a fresh list the caller may reorder or trim."""

    @abstractmethod
    def recorded_name(self) -> str:
        """How the fingerprint names the corpus, before the hash of its `files`."""

    def files(self) -> list[Path]:
        """Local files whose bytes are the data, for the study's data fingerprint."""
        return []
