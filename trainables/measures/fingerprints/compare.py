"""Layer by layer, how alike two fine-tuned encoders are, from their fingerprints alone.

Per hidden state (0 = embeddings, i = output of block i) linear CKA and SVCCA distance over
all real tokens pooled, and per block the attention Jensen-Shannon divergence averaged over
heads and query tokens per sentence, then over sentences: the measures of
`trainables.measures.dynamics`, by the same functions (`trainables.measures.similarity`),
between two trials instead of a trial and the pretrained encoder. Two fingerprints are compared on
the sentences both kept (a size cap may have dropped some at the end) and the blocks both have
(a truncated encoder has fewer); NumPy only, so the report can use it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from trainables.measures.fingerprints.record import LayerFingerprint
from trainables.measures.similarity import Prepared, compare_prepared, prepare, segmented_js

MEASURES = ("cka", "svcca", "attn_js")
Pair = tuple[Hashable, Hashable]


def common_sentences(a: LayerFingerprint, b: LayerFingerprint) -> int:
    """The sentences both fingerprints hold; they must be the same sentences, tokenised alike."""
    n = min(a.sentences, b.sentences)
    tokens = int(a.lengths[:n].sum())
    same = np.array_equal(a.lengths[:n], b.lengths[:n]) and np.array_equal(
        a.input_ids[:tokens], b.input_ids[:tokens]
    )
    if not same or n == 0:
        raise ValueError(
            "the two fingerprints were not taken on the same sentences (another dev set, "
            "model or tokenizer): they cannot be compared"
        )
    return n


def compare(a: LayerFingerprint, b: LayerFingerprint) -> dict[str, list[float]]:
    """`cka` and `svcca` per hidden state, `attn_js` per block, of two fingerprints."""
    return compare_pairs({0: a, 1: b}, [(0, 1)])[(0, 1)]


def compare_pairs(
    prints: Mapping[Hashable, LayerFingerprint], pairs: Sequence[Pair]
) -> dict[Pair, dict[str, list[float]]]:
    """Every pair of fingerprints (keys of `prints`) compared, one layer at a time: each
    fingerprint's layer is read and prepared once for all the pairs it is in, then dropped,
    so many fingerprints fit in memory."""
    shape = {pair: (common_sentences(prints[pair[0]], prints[pair[1]]),
                    min(prints[pair[0]].blocks, prints[pair[1]].blocks))
             for pair in pairs}  # fmt: skip
    out = {pair: {name: [] for name in MEASURES} for pair in pairs}
    deepest = max((blocks for _, blocks in shape.values()), default=0)
    for index in range(deepest + 1):
        prepared: dict[tuple[Hashable, int], Prepared] = {}
        for pair, (n, blocks) in shape.items():
            if index > blocks:
                continue
            sides = [_prepared(prints, key, index, n, prepared) for key in pair]
            cka, svcca = compare_prepared(*sides)
            out[pair]["cka"].append(cka)
            out[pair]["svcca"].append(svcca)
    for block in range(deepest):
        maps: dict[tuple[Hashable, int], np.ndarray] = {}
        for pair, (n, blocks) in shape.items():
            if block < blocks:
                a, b = (_maps(prints, key, block, n, maps) for key in pair)
                out[pair]["attn_js"].append(attention_js(a, b, prints[pair[0]].lengths[:n]))
    return out


def _prepared(prints, key, index: int, n: int, cache: dict) -> Prepared:
    if (key, n) not in cache:
        cache[(key, n)] = prepare(prints[key].hidden_state(index, n))
    return cache[(key, n)]


def _maps(prints, key, block: int, n: int, cache: dict) -> np.ndarray:
    if (key, n) not in cache:
        cache[(key, n)] = prints[key].attention_maps(block, n)
    return cache[(key, n)]


def attention_js(a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> float:
    """Mean JS divergence of two blocks' attention maps ([heads, cells], the sentences'
    n x n maps one after another): per query row, averaged over heads, then over each
    sentence's queries, then over sentences, as `trainables.measures.dynamics` averages it."""
    lengths = np.asarray(lengths, np.int64)
    row_lengths = np.repeat(lengths, lengths)  # each sentence has n rows of n keys
    row_starts = np.concatenate([[0], np.cumsum(row_lengths)[:-1]])
    per_row = segmented_js(a, b, row_starts).mean(0)
    sentence_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    per_sentence = np.add.reduceat(per_row, sentence_starts) / lengths
    return float(per_sentence.mean())
