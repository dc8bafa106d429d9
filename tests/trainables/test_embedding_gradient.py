"""Embedding gradients in a kept buffer: the same gradient as torch's, bit for bit, over steps
with padding, clipping and two lookups per step; the same trained tagger
(trainables/model/embedding_gradient.py)."""

import copy

import pytest
import torch
from torch import nn

from tests.tiny import MODEL_TYPES, sample_batch, tiny_model_folder
from trainables.model.embedding_gradient import RowGradientEmbedding, use_row_gradient_embeddings
from trainables.model.tagger import build_tagger


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


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_a_tagger_trains_to_the_same_weights(tmp_path, model_type, bf16):
    """A built tagger (its tables turned) and a copy with torch's embeddings back, trained
    under AdamW with clipping on padded batches, in fp32 and under bf16 autocast (emulated
    where the CPU lacks it): the same weights bit for bit."""
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
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    theirs = plain.state_dict()
    assert all(torch.equal(v, theirs[k]) for k, v in ours.state_dict().items())
