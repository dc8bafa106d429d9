"""The layer fingerprint and its file: a safetensors file of half-precision arrays, one per
layer, so a reader can load one layer of many fingerprints at a time.

Tensors, for an encoder of L blocks and H heads on N sentences of n_1..n_N real tokens
(T = sum n_i):

- `hidden.{i}`, i = 0..L: float16 [T, features], hidden state i (0 = embeddings, i = output
  of block i), the sentences' real tokens one after another;
- `attention.{l}`, l = 0..L-1: float16 [H, sum n_i^2], block l's attention probabilities, each
  sentence's n_i x n_i map (query rows, real keys only) row-major, one sentence after another;
- `lengths`: int32 [N], real tokens per sentence; `input_ids`: int32 [T], the tokens
  themselves, so that two fingerprints are compared only on the same sentences.

Metadata (text): format, blocks, heads, hidden_size, sentences, tokens, model, and
sample_sentences (how many sentences the sample had before a size cap dropped some).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

FILE_NAME = "fingerprint.safetensors"
FORMAT = "1"
HALF = np.float16


def kept_counts(kept: LayerFingerprint | None) -> dict[str, float]:
    """What a trial reports of the fingerprint it kept: `fingerprint_bytes` (0 when its cap
    held no sentence) and `fingerprint_sentences`."""
    return {
        "fingerprint_bytes": float(kept.nbytes if kept else 0),
        "fingerprint_sentences": float(kept.sentences if kept else 0),
    }


def sentence_bytes(length: int, blocks: int, heads: int, features: int) -> int:
    """What one sentence of `length` real tokens adds to a fingerprint's arrays."""
    half = np.dtype(HALF).itemsize
    hidden = (blocks + 1) * length * features * half
    attention = blocks * heads * length * length * half
    return hidden + attention + 4 * length + 4  # input ids and the length itself


def sentences_within(
    lengths: Sequence[int], blocks: int, heads: int, features: int, max_bytes: int | None
) -> int:
    """How many of the sample's first sentences fit in `max_bytes` (all when None)."""
    if max_bytes is None:
        return len(lengths)
    total = 0
    for count, length in enumerate(lengths):
        total += sentence_bytes(length, blocks, heads, features)
        if total > max_bytes:
            return count
    return len(lengths)


@dataclass(frozen=True)
class LayerFingerprint:
    """One encoder's layers on one sample. `tensors` maps the names above to arrays; a
    fingerprint read from a file loads each array only when asked for it."""

    lengths: np.ndarray
    input_ids: np.ndarray
    tensors: Mapping[str, np.ndarray]
    meta: dict[str, str] = field(default_factory=dict)

    @property
    def blocks(self) -> int:
        return int(self.meta["blocks"])

    @property
    def heads(self) -> int:
        return int(self.meta["heads"])

    @property
    def sentences(self) -> int:
        return len(self.lengths)

    @property
    def nbytes(self) -> int:
        """The bytes of its arrays: the size a cap limits (the file adds a header of < 1 kB)."""
        half = np.dtype(HALF).itemsize
        layers = sum(int(np.prod(shape)) * half for shape in self.shapes().values())
        return layers + self.lengths.nbytes + self.input_ids.nbytes

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Each layer array's shape, without reading a stored one."""
        stored = getattr(self.tensors, "shapes", None)
        if stored is not None:
            return dict(stored)
        return {name: tuple(array.shape) for name, array in self.tensors.items()}

    def hidden_state(self, index: int, sentences: int | None = None) -> np.ndarray:
        """Hidden state `index` (0 = embeddings) of the first `sentences` sentences."""
        tokens = int(self.lengths[:sentences].sum())
        return self.tensors[f"hidden.{index}"][:tokens]

    def attention_maps(self, block: int, sentences: int | None = None) -> np.ndarray:
        """Block `block`'s attention maps of the first `sentences` sentences, [heads, cells]."""
        cells = int((self.lengths[:sentences].astype(np.int64) ** 2).sum())
        return self.tensors[f"attention.{block}"][:, :cells]

    @classmethod
    def from_arrays(
        cls,
        hidden: Sequence[np.ndarray],
        attention: Sequence[np.ndarray],
        lengths: Sequence[int],
        input_ids: np.ndarray,
        meta: Mapping[str, str],
    ) -> LayerFingerprint:
        """A fingerprint of arrays in memory, in half precision; shapes are checked."""
        tensors = {f"hidden.{i}": np.ascontiguousarray(h, HALF) for i, h in enumerate(hidden)}
        tensors.update(
            {f"attention.{i}": np.ascontiguousarray(a, HALF) for i, a in enumerate(attention)}
        )
        first = tensors["hidden.0"]
        shape = {"format": FORMAT, "blocks": str(len(attention)),
                 "heads": str(attention[0].shape[0] if attention else 0),
                 "hidden_size": str(first.shape[1]), "sentences": str(len(lengths)),
                 "tokens": str(first.shape[0])}  # fmt: skip
        fingerprint = cls(
            np.asarray(lengths, np.int32),
            np.asarray(input_ids, np.int32),
            tensors,
            {**{k: str(v) for k, v in meta.items()}, **shape},
        )
        fingerprint.check("in memory")
        return fingerprint

    def check(self, where: str) -> None:
        """Every array has the shape the metadata and the lengths say: a damaged or foreign
        file is refused here rather than compared wrongly."""
        blocks, tokens = self.blocks, int(self.lengths.sum())
        cells = int((self.lengths.astype(np.int64) ** 2).sum())
        expected = {f"hidden.{i}": (tokens, int(self.meta["hidden_size"]))
                    for i in range(blocks + 1)}  # fmt: skip
        expected.update({f"attention.{i}": (self.heads, cells) for i in range(blocks)})
        shapes = self.shapes()
        if self.meta.get("format") != FORMAT or shapes != expected:
            raise ValueError(f"{where}: not a layer fingerprint of format {FORMAT} "
                             f"(arrays {shapes}, expected {expected})")  # fmt: skip
        if self.input_ids.shape != (tokens,):
            raise ValueError(f"{where}: {len(self.input_ids)} token ids for {tokens} tokens")

    def save(self, path: str | Path) -> int:
        """Write the file; returns its size in bytes."""
        arrays = {name: np.ascontiguousarray(self.tensors[name]) for name in self.tensors}
        arrays.update({"lengths": self.lengths, "input_ids": self.input_ids})
        save_file(arrays, str(path), metadata=dict(self.meta))
        return Path(path).stat().st_size

    @classmethod
    def load(cls, path: str | Path) -> LayerFingerprint:
        """Read a file: its lengths and ids now, each layer's array when it is asked for."""
        with safe_open(str(path), framework="np") as handle:
            meta = dict(handle.metadata() or {})
            names = [n for n in handle.keys() if n not in ("lengths", "input_ids")]  # noqa: SIM118
            lengths, ids = handle.get_tensor("lengths"), handle.get_tensor("input_ids")
            shapes = {n: tuple(handle.get_slice(n).get_shape()) for n in names}
        if "blocks" not in meta or "heads" not in meta or "hidden_size" not in meta:
            raise ValueError(f"{path}: not a layer fingerprint (its metadata is {meta})")
        fingerprint = cls(lengths, ids, _StoredArrays(Path(path), shapes), meta)
        fingerprint.check(str(path))
        return fingerprint


class _StoredArrays(Mapping):
    """A fingerprint file's layer arrays, read from the file one at a time on access."""

    def __init__(self, path: Path, shapes: dict[str, tuple[int, ...]]):
        self.path, self.shapes = path, shapes

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.shapes:
            raise KeyError(name)
        with safe_open(str(self.path), framework="np") as handle:
            return handle.get_tensor(name)

    def __iter__(self):
        return iter(self.shapes)

    def __len__(self) -> int:
        return len(self.shapes)
