"""Embedding gradients in a kept buffer: the same gradient as torch's, bit for bit, over steps
with padding, clipping and two lookups per step; the same trained tagger, clipped over the
written rows only (trainables/model/embedding_gradient.py,
trainables/training/optimization.py)."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.tiny import MODEL_TYPES, sample_batch, tiny_model_folder
from trainables.model.embedding_gradient import (
    RowGradientEmbedding,
    row_gradient_tables,
    use_row_gradient_embeddings,
)
from trainables.model.tagger import build_tagger
from trainables.training.optimization import ROW_SPAN, clip_gradients, written_rows


def _tables(padding_idx=0):
    torch.manual_seed(0)
    plain = nn.Embedding(50, 6, padding_idx=padding_idx)
    ours = copy.deepcopy(plain)
    assert use_row_gradient_embeddings(ours) == 1
    return plain, ours


def _ids(step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(step)
    ids = torch.randint(0, 12 + 3 * step, (4, 9), generator=g)  # repeats within a batch
    ids[-1, -3:] = 0  # padding
    return ids


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("padding_idx", [0, None])
def test_the_gradient_is_torchs_at_every_step(threads, padding_idx):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    plain, ours = _tables(padding_idx)
    try:
        for step in range(5):
            ids, upstream = _ids(step), torch.randn(4, 9, 6)
            for table in (plain, ours):
                (table(ids) * upstream).sum().backward()
                if step == 2:  # clipping scales a gradient in place
                    table.weight.grad.mul_(0.5)
            assert torch.equal(ours.weight.grad, plain.weight.grad), step
            if padding_idx is not None:
                assert not ours.weight.grad[padding_idx].any()
            for table in (plain, ours):
                table.weight.grad = None  # zero_grad(set_to_none=True)
        assert torch.get_num_threads() == threads  # the lookup gives the thread count back
    finally:
        torch.set_num_threads(before)


def test_two_lookups_before_a_step_add_up_as_torchs_do():
    plain, ours = _tables()
    for step in range(3):
        for table in (plain, ours):
            table(_ids(step)).sum().backward()
            table(_ids(step + 10)).pow(2).sum().backward()
        assert torch.equal(ours.weight.grad, plain.weight.grad), step
        for table in (plain, ours):
            table.weight.grad = None


def test_a_gradient_zeroed_in_place_is_added_to():
    plain, ours = _tables()
    for table in (plain, ours):
        table(_ids(0)).sum().backward()
        table.weight.grad.zero_()  # zero_grad(set_to_none=False)
        table(_ids(1)).sum().backward()
        table.weight.grad = None
        table(_ids(2)).sum().backward()
    assert torch.equal(ours.weight.grad, plain.weight.grad)


def test_frozen_tables_and_evaluation_take_the_plain_lookup():
    _, ours = _tables()
    ids = _ids(0)
    with torch.no_grad():
        assert torch.equal(ours(ids), nn.functional.embedding(ids, ours.weight, 0))
    ours.weight.requires_grad_(False)
    assert ours(ids).grad_fn is None and ours.weight.grad is None


def test_only_plain_tables_are_turned():
    model = nn.ModuleList([nn.Embedding(5, 2), nn.Embedding(5, 2, sparse=True),
                           nn.Embedding(5, 2, max_norm=1.0), nn.Linear(2, 2)])  # fmt: skip
    keys = list(model.state_dict())
    assert use_row_gradient_embeddings(model) == 1
    assert type(model[0]) is RowGradientEmbedding and type(model[1]) is nn.Embedding
    assert type(model[2]) is nn.Embedding and list(model.state_dict()) == keys


def test_written_rows_are_where_the_gradient_is():
    plain, ours = _tables()
    assert ours.gradient_rows() is None  # no gradient yet
    ids = _ids(0)
    ours(ids).sum().backward()
    rows = ours.gradient_rows()
    assert torch.equal(rows, torch.unique(ids[ids != 0]))
    unwritten = torch.ones(50, dtype=torch.bool)
    unwritten[rows] = False
    assert not ours.weight.grad[unwritten].any()
    ours.weight.grad = ours.weight.grad.clone()  # no longer the kept buffer: any row may be
    assert ours.gradient_rows() is None


@pytest.mark.parametrize("threads", [1, 2])
def test_the_norm_over_written_rows_is_the_whole_tables(threads):
    """What clipping over the written rows rests on, at MiniLM's word-table shape, for
    gradients from 1e-6 to 1e2 and 50 to 1500 rows: the same float, bit for bit."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    generator = torch.Generator().manual_seed(threads)
    try:
        for _ in range(20):
            grad = torch.zeros(30522, 384)
            count = int(torch.randint(50, 1500, (), generator=generator))
            ids = torch.randint(0, 30522, (count,), generator=generator)
            scale = 10 ** float(torch.empty(()).uniform_(-6, 2, generator=generator))
            grad.index_add_(0, ids, torch.randn(len(ids), 384, generator=generator) * scale)
            written = torch.linalg.vector_norm(grad.index_select(0, torch.unique(ids)))
            assert written.item() == torch._foreach_norm([grad], 2.0)[0].item()
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("width", [384, 36], ids=["written-rows", "whole-table"])
def test_a_clipped_table_trains_to_torchs_weights(width):
    """An embedding table under a linear head, trained under AdamW and clipped on every step:
    at MiniLM's width `clip_gradients` reads the written rows alone, at a width that is no
    multiple of `ROW_SPAN` the whole table (its norm over the rows would differ in the last
    bit); either way the weights are torch's embedding and `clip_grad_norm_`'s, bit for bit."""
    torch.manual_seed(0)
    plain = nn.Sequential(nn.Embedding(3000, width, padding_idx=0), nn.Linear(width, 5))
    ours = copy.deepcopy(plain)
    use_row_gradient_embeddings(ours)
    tables = row_gradient_tables(ours)
    for model in (plain, ours):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
        for step in range(8):
            generator = torch.Generator().manual_seed(step)
            ids = torch.randint(1, 3000, (16, 40), generator=generator)
            ids[:, -5:] = 0  # padding
            labels = torch.randint(0, 5, (16, 40), generator=generator)
            F.cross_entropy(model(ids).reshape(-1, 5), labels.reshape(-1)).backward()
            if model is ours:
                rows = written_rows(ours[0].weight, tables)
                assert (rows is not None) == (width % ROW_SPAN == 0)
                clip_gradients(list(ours.parameters()), 1e-3, tables)
            else:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3, foreach=True)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    theirs = plain.state_dict()
    assert all(torch.equal(v, theirs[k]) for k, v in ours.state_dict().items())


@pytest.mark.parametrize("max_norm", [0.1, 1e3], ids=["clipped", "within"])
@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_a_tagger_trains_to_the_same_weights(tmp_path, model_type, bf16, max_norm):
    """A built tagger (its tables turned, clipped by `clip_gradients`; the tiny models' width
    32 takes the whole table) and a copy with torch's embeddings back (clipped by torch),
    trained under AdamW on padded batches, in fp32 and under bf16 autocast (emulated where
    the CPU lacks it): the same weights bit for bit."""
    folder = tiny_model_folder(tmp_path, model_type, layers=2)
    ours, _ = build_tagger(str(folder), 3, generator=torch.Generator().manual_seed(0))
    assert any(type(m) is RowGradientEmbedding for m in ours.modules())
    plain = copy.deepcopy(ours)
    for module in plain.modules():
        if type(module) is RowGradientEmbedding:
            module.__class__ = nn.Embedding
    for model in (ours, plain):
        torch.manual_seed(1)  # dropout masks
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
        for step in range(4):
            input_ids, attention_mask = sample_batch(3, 8, seed=step)
            labels = torch.randint(
                0, 3, input_ids.shape, generator=torch.Generator().manual_seed(step)
            )
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                _, loss = model(input_ids, attention_mask, labels)
            loss.backward()
            if model is ours:
                clip_gradients(list(ours.parameters()), max_norm, row_gradient_tables(ours))
            else:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, foreach=True)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    theirs = plain.state_dict()
    assert all(torch.equal(v, theirs[k]) for k, v in ours.state_dict().items())
