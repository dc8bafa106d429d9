"""Dropout with `keep_mask`'s masks: the keep rule, determinism from the global generator, the
attention path against SDPA, and that a built tagger uses them (trainables/model/dropout.py)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.tiny import MODEL_TYPES, sample_batch, tiny_encoder, tiny_model_folder
from trainables.model.dropout import (
    ATTENTION,
    MaskDropout,
    attention,
    keep_mask,
    mask_dropout,
    mask_values,
    use_mask_attention_dropout,
    use_mask_dropout,
)
from trainables.model.tagger import build_tagger


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_mask_keeps_each_element_with_probability_one_minus_p(p):
    torch.manual_seed(0)
    kept = keep_mask(torch.Size([400_000]), p, torch.device("cpu")).float().mean().item()
    assert abs(kept - (1 - p)) < 0.005


def test_masks_come_from_the_global_generator_and_advance_it():
    shape = torch.Size([3, 7, 5])  # an odd element count: the last 64-bit word is half used
    torch.manual_seed(3)
    first, second = keep_mask(shape, 0.3, "cpu"), keep_mask(shape, 0.3, "cpu")
    torch.manual_seed(3)
    assert torch.equal(keep_mask(shape, 0.3, "cpu"), first)
    state = torch.get_rng_state()
    assert torch.equal(keep_mask(shape, 0.3, "cpu"), second)
    torch.set_rng_state(state)  # what a restored checkpoint does
    assert torch.equal(keep_mask(shape, 0.3, "cpu"), second)
    assert not torch.equal(first, second)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mask_dropout_zeroes_or_scales_as_torch_does(dtype):
    x = torch.randn(64, 33).to(dtype) + 3.0
    out = mask_dropout(x, 0.25, training=True)
    scaled = x * torch.ones((), dtype=dtype).div_(0.75)
    assert out.dtype == dtype
    assert torch.all((out == 0) | (out == scaled))
    assert 0 < int((out == 0).sum()) < x.numel()
    assert mask_dropout(x, 0.25, training=False) is x
    assert torch.equal(mask_dropout(x, 0.0, training=True), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_mask_values_are_the_bool_masks_conversion_bit_for_bit(dtype):
    keep = keep_mask(torch.Size([3, 7, 65]), 0.4, torch.device("cpu"))
    values = mask_values(keep, dtype)
    assert values.dtype == dtype
    assert torch.equal(values.view(torch.uint8), keep.to(dtype).view(torch.uint8))  # the bytes
    assert 0 < int(values.sum()) < keep.numel()


def test_mask_dropout_gradient_is_the_same_mask():
    x = torch.randn(10, 20, requires_grad=True)
    torch.manual_seed(1)
    out = mask_dropout(x, 0.4, training=True)
    out.sum().backward()
    assert torch.equal(x.grad, (out != 0).float() / 0.6)


def test_use_mask_dropout_replaces_every_plain_dropout_keeping_p_and_mode():
    model = nn.Sequential(nn.Dropout(0.2), nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.3)))
    model[1].eval()
    assert use_mask_dropout(model) == 2
    assert isinstance(model[0], MaskDropout) and model[0].p == 0.2 and model[0].training
    assert isinstance(model[1][1], MaskDropout) and model[1][1].p == 0.3
    assert not model[1][1].training


def _qkv(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2, 4, 6, 8, generator=g) for _ in range(3)]


def test_attention_path_computes_what_sdpa_does():
    """With a dropout so small that every element is kept and the scale is 1.0 in fp32, the
    path through `keep_mask` gives SDPA's attention (here with a padding mask)."""
    module = nn.Module()  # training, as `attention` requires for its own path
    q, k, v = _qkv()
    pad = torch.zeros(2, 1, 1, 6)
    pad[1, ..., 4:] = torch.finfo(torch.float32).min
    ours, _ = attention(module, q, k, v, pad, dropout=1e-12)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=pad).transpose(1, 2)
    assert ours.shape == (2, 6, 4, 8)
    torch.testing.assert_close(ours, expected)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_a_built_encoder_in_training_attends_as_sdpa_does_padding_masked(tmp_path, model_type):
    """The whole encoder on a padded batch, in training with no hidden dropout and an attention
    dropout that keeps everything: the path through `attention` gives the states SDPA gives,
    so the padding mask reaches it (transformers builds none for a name without a mask
    function)."""
    folder = tiny_model_folder(tmp_path, model_type, layers=2)
    model, _ = build_tagger(str(folder), 3, generator=torch.Generator().manual_seed(0))
    encoder = model.encoder
    if encoder.config._attn_implementation != ATTENTION:
        pytest.skip(f"{model_type} does not attend through sdpa")
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
        if isinstance(getattr(module, "dropout", None), nn.Dropout) and hasattr(module, "scaling"):
            module.dropout.p = 1e-12  # attention dropout on: `attention` takes its own path
    input_ids, attention_mask = sample_batch()
    assert not attention_mask.all()  # padded
    model.train()
    ours = encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    encoder.set_attn_implementation("sdpa")
    expected = encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    real = attention_mask.bool()
    torch.testing.assert_close(ours[real], expected[real], atol=1e-5, rtol=1e-4)


def test_attention_dropout_is_seeded_and_drops_probabilities():
    module = nn.Module()
    q, k, v = _qkv()
    torch.manual_seed(5)
    a, _ = attention(module, q, k, v, None, dropout=0.5)
    torch.manual_seed(5)
    b, _ = attention(module, q, k, v, None, dropout=0.5)
    full, _ = attention(module.eval(), q, k, v, None, dropout=0.5)  # eval: no dropout
    assert torch.equal(a, b) and not torch.allclose(a, full)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_built_tagger_has_no_torch_dropout_left(tmp_path, model_type):
    folder = tiny_model_folder(tmp_path, model_type, layers=2)
    model, _ = build_tagger(str(folder), 3, generator=torch.Generator().manual_seed(0))
    assert not [m for m in model.modules() if type(m) is nn.Dropout]
    assert model.encoder.config._attn_implementation in (ATTENTION, "eager")
    input_ids, attention_mask = sample_batch()
    torch.manual_seed(0)
    first, _ = model(input_ids, attention_mask)
    torch.manual_seed(0)
    again, _ = model(input_ids, attention_mask)
    assert torch.equal(first, again)


def test_an_encoder_without_sdpa_keeps_its_attention():
    encoder = tiny_encoder("bert", 1)
    encoder.set_attn_implementation("eager")
    assert not use_mask_attention_dropout(encoder)
    assert encoder.config._attn_implementation == "eager"
