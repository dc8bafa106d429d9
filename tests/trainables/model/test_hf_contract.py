"""What the trainer relies on in transformers beyond its public API, checked against the
installed transformers: each assumption listed in trainables/model/hf_internals.py has a test
here, so an upgrade that breaks one fails by name instead of training a different model."""

from __future__ import annotations

import inspect

import pytest
import torch
from transformers import AutoModel

from tests.tiny import MODEL_TYPES, sample_batch, tiny_config, tiny_encoder
from trainables.model import hf_internals


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_the_encoder_class_is_the_one_automodel_builds(model_type):
    config = tiny_config(model_type, layers=1)
    try:
        found = hf_internals.encoder_class(config)
    except (AttributeError, KeyError) as err:
        pytest.fail(f"AutoModel._model_mapping[type(config)] no longer works: {err!r}")
    assert found is type(AutoModel.from_config(config)), "AutoModel._model_mapping changed"


def test_the_attention_implementation_is_read_and_switched():
    """dynamics switches to eager (the one that returns attention probabilities) and back."""
    model = tiny_encoder("bert", layers=2)
    before = hf_internals.attention_of(model.config)
    assert before in ("sdpa", "eager"), f"config._attn_implementation is now {before!r}"
    hf_internals.set_attention(model, "eager")
    assert hf_internals.attention_of(model.config) == "eager"
    ids, mask = sample_batch()
    out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
    assert out.attentions is not None and len(out.attentions) == 2
    hf_internals.set_attention(model, before)
    assert hf_internals.attention_of(model.config) == before
    assert hf_internals.attention_of(None) is None


def test_sdpa_attention_takes_what_an_attention_function_is_given():
    try:
        function = hf_internals.sdpa_attention()
    except ImportError as err:
        pytest.fail(f"transformers' sdpa_attention_forward moved: {err}")
    names = list(inspect.signature(function).parameters)
    assert names[:5] == ["module", "query", "key", "value", "attention_mask"], names
    assert {"dropout", "scaling"} <= set(names), names


def test_a_registered_attention_gets_sdpas_padding_mask():
    """Without the mask function registered too, transformers would build no padding mask
    for the new name and every token would attend to the padding."""
    masks: list[torch.Tensor | None] = []
    sdpa = hf_internals.sdpa_attention()

    def recording(module, query, key, value, attention_mask, **kwargs):
        masks.append(attention_mask)
        return sdpa(module, query, key, value, attention_mask, **kwargs)

    model = tiny_encoder("bert", layers=1)
    if hf_internals.attention_of(model.config) != "sdpa":
        pytest.skip("this torch/transformers builds the encoder without sdpa")
    ids, mask = sample_batch()
    expected = model(input_ids=ids, attention_mask=mask).last_hidden_state
    hf_internals.register_attention("contract_probe", recording)
    model.set_attn_implementation("contract_probe")
    got = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert masks and masks[0] is not None, "no padding mask built for a registered attention"
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
