import numpy as np
import pytest

from tests.tiny import tiny_tokenizer
from trainables.data.encoding import IGNORE_INDEX, decode, encode
from trainables.data.labels import LabelMap
from trainables.data.types import TaggedSentence


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return tiny_tokenizer(tmp_path_factory.mktemp("tok"))


def sentence(pairs):
    return TaggedSentence(tuple(w for w, _ in pairs), tuple(t for _, t in pairs))


SENTS = [
    sentence(
        [("john", "B-PER"), ("walked", "O"), ("to", "O"), ("new", "B-LOC"), ("york", "I-LOC")]
    ),
    sentence([("xyzzy", "B-ORG"), ("corp", "I-ORG")]),
]
LABELS = LabelMap.from_sentences(SENTS)


def test_first_subword_carries_the_tag_and_the_rest_are_ignored(tokenizer):
    split = encode(SENTS, tokenizer, LABELS, max_length=32)
    w = split.windows[1]  # "xyzzy" splits into several pieces
    assert w.input_ids[0] == tokenizer.cls_token_id and w.input_ids[-1] == tokenizer.sep_token_id
    first = w.first_subword
    assert [w.labels[p] for p in first] == [LABELS.index("B-ORG"), LABELS.index("I-ORG")]
    labelled = [i for i, label in enumerate(w.labels) if label != IGNORE_INDEX]
    assert labelled == list(first)
    assert first[1] - first[0] > 1  # "xyzzy" really is several sub-words


def test_label_all_subwords_repeats_the_word_tag(tokenizer):
    w = encode(SENTS, tokenizer, LABELS, max_length=32, label_all_subwords=True).windows[1]
    pieces = w.labels[w.first_subword[0] : w.first_subword[1]]
    assert len(pieces) > 1 and set(pieces) == {LABELS.index("B-ORG")}


def test_decode_round_trips_gold_labels(tokenizer):
    split = encode(SENTS, tokenizer, LABELS, max_length=32)
    # a "prediction" equal to the labels at first sub-words must decode to the gold tags
    preds = [np.array([max(label, 0) for label in w.labels]) for w in split.windows]
    assert decode(split, preds, LABELS) == [list(s.tags) for s in SENTS]


def test_long_sentences_are_windowed_not_truncated(tokenizer):
    words = [("paris", "B-LOC"), ("is", "O")] * 20  # 40 words, more than fits in 16 tokens
    long = sentence(words)
    split = encode([long], tokenizer, LABELS, max_length=16)
    assert split.windowed_sentences == 1 and len(split.windows) > 1
    assert all(len(w) <= 16 for w in split.windows)
    covered = sum(len(w.first_subword) for w in split.windows)
    assert covered == len(words)  # every gold word is evaluated exactly once
    preds = [np.array([max(label, 0) for label in w.labels]) for w in split.windows]
    assert decode(split, preds, LABELS) == [list(long.tags)]


def test_a_word_longer_than_the_window_keeps_its_first_pieces(tokenizer):
    long_word = sentence([("abcdefghijklmnopqrstuvwxyz", "B-ORG"), ("corp", "I-ORG")])
    split = encode([long_word], tokenizer, LABELS, max_length=10)
    assert split.truncated_words == 1
    assert all(len(w) <= 10 for w in split.windows)
    assert sum(len(w.first_subword) for w in split.windows) == 2
