"""Word-level sentences to sub-word model inputs, and model outputs back to word-level tags.

Evaluation is at word level on *every* gold word: a sentence longer than the model's
`max_length` is cut into consecutive windows on word boundaries instead of being truncated,
so no gold entity silently disappears from the dev/test score. How many sentences needed
windows is counted and reported by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trainables.data.labels import LabelMap
from trainables.data.types import TaggedSentence

IGNORE_INDEX = -100


@dataclass(frozen=True)
class Window:
    """One model input: a whole sentence, or a run of its words when the sentence is long."""

    input_ids: tuple[int, ...]
    labels: tuple[int, ...]  # IGNORE_INDEX where no loss is taken
    first_subword: tuple[int, ...]  # position in input_ids of each word's first sub-word
    sentence: int  # index of the sentence in the encoded list
    word_start: int  # index of this window's first word in that sentence

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass(frozen=True)
class EncodedSplit:
    windows: list[Window]
    gold: list[tuple[str, ...]]  # word-level gold tags per sentence, for scoring
    windowed_sentences: int  # sentences that did not fit in one window
    truncated_words: int  # single words longer than a window (kept by their first pieces)

    @property
    def num_tokens(self) -> int:
        return sum(len(w) for w in self.windows)


def _subword_pieces(tokenizer, sentences: Sequence[TaggedSentence]) -> list[list[list[int]]]:
    """Sub-word ids per word per sentence; a word the tokenizer drops becomes [UNK]."""
    batch = tokenizer(
        [list(s.words) for s in sentences], is_split_into_words=True, add_special_tokens=False
    )
    unk = tokenizer.unk_token_id
    out = []
    for i, sentence in enumerate(sentences):
        pieces: list[list[int]] = [[] for _ in sentence.words]
        for token_id, word in zip(batch["input_ids"][i], batch.word_ids(i), strict=True):
            if word is not None:
                pieces[word].append(token_id)
        out.append([p if p else [unk] for p in pieces])
    return out


def _word_runs(pieces: list[list[int]], budget: int) -> list[tuple[int, int]]:
    """Consecutive word ranges [start, end) whose sub-words fit in `budget`."""
    runs, start, used = [], 0, 0
    for i, p in enumerate(pieces):
        n = min(len(p), budget)
        if used + n > budget and i > start:
            runs.append((start, i))
            start, used = i, 0
        used += n
    runs.append((start, len(pieces)))
    return runs


def _special_affixes(tokenizer) -> tuple[list[int], list[int]]:
    """The special tokens a tokenizer puts before and after one sentence ([CLS] ... [SEP],
    <s> ... </s>), found by encoding a sample word with and without them: this works for
    every tokenizer family, whatever helper methods its class provides."""
    full = tokenizer(["a"], is_split_into_words=True)["input_ids"]
    bare = tokenizer(["a"], is_split_into_words=True, add_special_tokens=False)["input_ids"]
    for start in range(len(full) - len(bare) + 1):
        if full[start : start + len(bare)] == bare:
            return full[:start], full[start + len(bare) :]
    raise ValueError(f"cannot locate the words among the special tokens of {type(tokenizer)}")


def _make_window(
    tokenizer, pieces, tag_ids, start, end, budget, sentence_index, label_all_subwords
) -> Window:
    ids: list[int] = []
    labels: list[int] = []
    first: list[int] = []
    for w in range(start, end):
        word_ids = pieces[w][:budget]
        first.append(len(ids))
        ids.extend(word_ids)
        follow = tag_ids[w] if label_all_subwords else IGNORE_INDEX
        labels.extend([tag_ids[w]] + [follow] * (len(word_ids) - 1))
    prefix, suffix = _special_affixes(tokenizer)
    full = [*prefix, *ids, *suffix]
    offset = len(prefix)
    full_labels = [IGNORE_INDEX] * len(full)
    full_labels[offset : offset + len(labels)] = labels
    return Window(
        input_ids=tuple(full),
        labels=tuple(full_labels),
        first_subword=tuple(offset + p for p in first),
        sentence=sentence_index,
        word_start=start,
    )


def encode(
    sentences: Sequence[TaggedSentence],
    tokenizer,
    label_map: LabelMap,
    *,
    max_length: int,
    label_all_subwords: bool = False,
) -> EncodedSplit:
    """Align word tags to sub-words: the first sub-word carries the tag; the others carry it
    too when `label_all_subwords`, else they are ignored by the loss."""
    prefix, suffix = _special_affixes(tokenizer)
    budget = max_length - len(prefix) - len(suffix)
    if budget < 1:
        raise ValueError(f"max_length {max_length} leaves no room for words")
    windows: list[Window] = []
    windowed = truncated = 0
    for index, (sentence, pieces) in enumerate(
        zip(sentences, _subword_pieces(tokenizer, sentences), strict=True)
    ):
        tag_ids = [label_map.index(t) for t in sentence.tags]
        runs = _word_runs(pieces, budget)
        windowed += len(runs) > 1
        truncated += sum(len(p) > budget for p in pieces)
        windows.extend(
            _make_window(tokenizer, pieces, tag_ids, s, e, budget, index, label_all_subwords)
            for s, e in runs
        )
    return EncodedSplit(windows, [s.tags for s in sentences], windowed, truncated)


def decode(
    split: EncodedSplit, predictions: Sequence[np.ndarray], label_map: LabelMap
) -> list[list[str]]:
    """Word-level predicted tags from per-window label ids, read at each first sub-word."""
    tags = [["O"] * len(g) for g in split.gold]
    labels = label_map.labels
    for window, pred in zip(split.windows, predictions, strict=True):
        row = tags[window.sentence]
        for k, pos in enumerate(window.first_subword):
            row[window.word_start + k] = labels[int(pred[pos])]
    return tags
