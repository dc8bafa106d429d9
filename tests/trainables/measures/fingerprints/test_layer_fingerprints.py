"""Layer fingerprints of tiny encoders: what they keep, what a size cap drops, the file, and
comparing two of them layer by layer with the NumPy measures the report uses (checked
against the torch ones of trainables/measures/dynamics.py)."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from tests.trainables.measures.test_dynamics import (
    batches,
    pretrained,
    random_distributions,
    reinitialised,
)
from trainables.measures import dynamics, similarity
from trainables.measures.fingerprints import LayerFingerprint, sentences_within
from trainables.measures.fingerprints.capture import capture
from trainables.measures.fingerprints.compare import compare, compare_pairs
from trainables.settings.sizes import parse_size

LAYERS = 4


# --- the NumPy measures against their definitions and the torch ones ----------------------


@pytest.mark.parametrize("sharpness", [0.1, 1.0, 10.0, 200.0])
def test_numpy_js_equals_the_torch_js(sharpness):
    p = random_distributions((64, 12), sharpness, seed=0)
    q = random_distributions((64, 12), sharpness, seed=1)
    q[:5, :6] = 0  # zero probabilities on one side only
    q[:5, 6] += 0.5
    q = q / q.sum(-1, keepdim=True)
    expected = dynamics.js_divergence(p, q).numpy()
    assert similarity.js_divergence(p.numpy(), q.numpy()) == pytest.approx(expected, abs=1e-12)


def test_segmented_js_normalises_each_row_and_equals_row_by_row_js():
    rng = np.random.default_rng(0)
    widths = [3, 5, 1, 4]
    rows_p = [rng.dirichlet(np.ones(w)) * 1.001 for w in widths]  # rounded: sums not exactly 1
    rows_q = [rng.dirichlet(np.ones(w)) for w in widths]
    starts = np.cumsum([0, *widths[:-1]])
    got = similarity.segmented_js(np.concatenate(rows_p), np.concatenate(rows_q), starts)
    pairs = zip(rows_p, rows_q, strict=True)
    expected = [similarity.js_divergence(p / p.sum(), q / q.sum()) for p, q in pairs]
    assert got == pytest.approx(expected, abs=1e-12)
    assert got[2] == 0.0  # one key: the same distribution


def _textbook(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """CKA and SVCCA written out as in the papers, for comparison with the prepared form."""
    x, y = x - x.mean(0), y - y.mean(0)
    cka = np.linalg.norm(y.T @ x) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y))
    bases = []
    for m in (x, y):
        u, s, _ = np.linalg.svd(m, full_matrices=False)
        k = int(np.searchsorted(np.cumsum(s**2) / np.sum(s**2), 0.99)) + 1
        bases.append(u[:, :k])
    correlations = np.linalg.svd(bases[0].T @ bases[1], compute_uv=False)
    return float(cka), float(1 - correlations.mean())


def test_prepared_measures_equal_the_textbook_formulas():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 12))
    y = x[:, :8] @ rng.normal(size=(8, 10)) + rng.normal(size=(200, 10))
    cka, svcca = similarity.compare_prepared(similarity.prepare(x), similarity.prepare(y))
    assert (cka, svcca) == pytest.approx(_textbook(x, y), abs=1e-10)
    assert 0.1 < cka < 0.99 and 0.05 < svcca < 0.9


def test_equal_inputs_are_exactly_alike():
    x = np.random.default_rng(4).normal(size=(50, 6)).astype(np.float16)
    assert similarity.compare_prepared(similarity.prepare(x), similarity.prepare(x.copy())) == (
        1.0,
        0.0,
    )


# --- capturing ----------------------------------------------------------------------------


def test_a_fingerprint_keeps_real_tokens_only_whatever_the_padding():
    encoder = pretrained()
    padded = batches(n=2, size=5, width=10)
    # the same sentences, one per batch: no padding at all
    alone = [{k: v[row : row + 1, : int(b["attention_mask"][row].sum())] for k, v in b.items()}
             for b in padded for row in range(5)]  # fmt: skip
    a, b = capture(encoder, padded), capture(encoder, alone)
    lengths = [int(n) for batch in padded for n in batch["attention_mask"].sum(1)]
    assert a.lengths.tolist() == lengths and a.sentences == 10
    assert a.tensors["hidden.0"].shape == (sum(lengths), 32)
    assert a.tensors["attention.0"].shape == (4, sum(n * n for n in lengths))
    for name in a.tensors:
        assert a.tensors[name].dtype == np.float16
        assert np.allclose(a.tensors[name], b.tensors[name], atol=2e-3), name
    # each query row of each stored map is a distribution over the sentence's real keys
    first = a.attention_maps(0, 1).astype(np.float64).reshape(4, lengths[0], lengths[0])
    assert first.sum(-1) == pytest.approx(np.ones((4, lengths[0])), abs=2e-3)


def test_a_size_cap_drops_the_last_sentences_until_the_rest_fits():
    encoder, sample = pretrained(), batches()
    whole = capture(encoder, sample)
    cap = whole.nbytes // 2
    half = capture(encoder, sample, max_bytes=cap)
    assert 0 < half.sentences < whole.sentences and half.nbytes <= cap
    assert half.meta["sample_sentences"] == str(whole.sentences)
    assert half.lengths.tolist() == whole.lengths[: half.sentences].tolist()
    assert half.sentences == sentences_within(whole.lengths.tolist(), LAYERS, 4, 32, cap)
    assert capture(encoder, sample, max_bytes=10) is None  # not one sentence fits
    # compared on the sentences both kept: the same as comparing the whole one's prefix
    other = capture(reinitialised(encoder, 3), sample)
    capped_other = capture(reinitialised(encoder, 3), sample, max_bytes=cap)
    assert compare(half, other) == compare(half, capped_other)


# --- comparing ----------------------------------------------------------------------------


def test_identical_encoders_give_exactly_alike_layers():
    encoder, sample = pretrained(), batches()
    result = compare(capture(encoder, sample), capture(copy.deepcopy(encoder), sample))
    assert result == {"cka": [1.0] * (LAYERS + 1), "svcca": [0.0] * (LAYERS + 1),
                      "attn_js": [0.0] * LAYERS}  # fmt: skip


@pytest.mark.parametrize("model_type", ["bert", "distilbert", "deberta-v2"])
def test_a_reinitialised_top_block_differs_from_that_block_up_only(model_type):
    encoder, sample = pretrained(model_type), batches()
    top = LAYERS - 1
    result = compare(capture(encoder, sample), capture(reinitialised(encoder, top), sample))
    # hidden state i is the output of block i - 1: states 0..top and blocks 0..top-1 are the
    # same computation on the same weights, exactly
    assert result["cka"][: top + 1] == [1.0] * (top + 1)
    assert result["svcca"][: top + 1] == [0.0] * (top + 1)
    assert result["attn_js"][:top] == [0.0] * top
    assert result["cka"][top + 1] < 0.99 and result["svcca"][top + 1] > 0.01
    assert 0.0 < result["attn_js"][top] <= math.log(2)


def test_comparing_fingerprints_agrees_with_the_dynamics_of_the_same_pair():
    encoder, sample = pretrained(), batches()
    moved = reinitialised(encoder, 2)
    expected = dynamics.layer_dynamics(moved, encoder, sample)
    got = compare(capture(moved, sample), capture(encoder, sample))
    for measure in ("cka", "svcca", "attn_js"):  # half precision storage: close, not equal
        assert got[measure] == pytest.approx(expected[measure], abs=2e-3), measure


def test_a_truncated_encoder_is_compared_on_the_blocks_both_have():
    encoder, sample = pretrained("bert", layers=LAYERS), batches()
    truncated = copy.deepcopy(encoder)
    truncated.encoder.layer = truncated.encoder.layer[:2]
    result = compare(capture(encoder, sample), capture(truncated, sample))
    assert result == {"cka": [1.0] * 3, "svcca": [0.0] * 3, "attn_js": [0.0] * 2}


def test_fingerprints_of_other_sentences_are_refused():
    encoder = pretrained()
    with pytest.raises(ValueError, match="not taken on the same sentences"):
        compare(capture(encoder, batches(seed=0)), capture(encoder, batches(seed=1)))


def test_many_pairs_at_once_give_the_numbers_of_each_pair_alone():
    encoder, sample = pretrained(), batches()
    prints = {k: capture(reinitialised(encoder, k), sample) for k in (1, 2, 3)}
    pairs = [(1, 2), (1, 3), (2, 3)]
    together = compare_pairs(prints, pairs)
    assert together == {(a, b): compare(prints[a], prints[b]) for a, b in pairs}


# --- the file -----------------------------------------------------------------------------


def test_the_file_reads_back_exactly_and_a_damaged_one_is_refused(tmp_path):
    fingerprint = capture(pretrained(), batches(), model="tiny")
    size = fingerprint.save(tmp_path / "f.safetensors")
    assert fingerprint.nbytes < size < fingerprint.nbytes + 1024
    read = LayerFingerprint.load(tmp_path / "f.safetensors")
    assert read.meta == fingerprint.meta and read.nbytes == fingerprint.nbytes
    for name in fingerprint.tensors:
        assert np.array_equal(read.tensors[name], fingerprint.tensors[name])
    assert compare(read, fingerprint)["cka"] == [1.0] * (LAYERS + 1)
    damaged = LayerFingerprint(
        fingerprint.lengths[:-1], fingerprint.input_ids, fingerprint.tensors, fingerprint.meta
    )
    damaged.save(tmp_path / "damaged.safetensors")
    with pytest.raises(ValueError, match="not a layer fingerprint"):
        LayerFingerprint.load(tmp_path / "damaged.safetensors")


@pytest.mark.parametrize(
    ("written", "size"),
    [("20MB", 20_000_000), ("20 mb", 20_000_000), ("512kB", 512_000), ("1.5GiB", 1.5 * 2**30),
     (1000, 1000), (2.0e7, 20_000_000), ("100", 100), ("100B", 100)],
)  # fmt: skip
def test_sizes_people_write(written, size):
    assert parse_size(written) == size


@pytest.mark.parametrize("written", ["20 parsecs", "MB", "-5MB", 0, 2.5, True, "1e3", None, [1]])
def test_what_is_not_a_size(written):
    with pytest.raises(ValueError, match="a size such as 20MB"):
        parse_size(written)


def test_a_padded_sentence_without_real_tokens_is_left_out():
    sample = batches(n=1, size=3)
    sample[0]["attention_mask"][1] = 0
    fingerprint = capture(pretrained(), sample)
    assert fingerprint.sentences == 2 and int(fingerprint.meta["sample_sentences"]) == 2
    assert torch.equal(sample[0]["attention_mask"][1], torch.zeros(10, dtype=torch.long))
