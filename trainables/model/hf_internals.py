"""Every use the trainer makes of transformers beyond its public API.

Each is done here and nowhere else, so a transformers upgrade that changes one breaks this
module only; tests/trainables/model/test_hf_contract.py pins each against the installed
transformers and fails, naming it, when one no longer holds.

The assumptions:
- `AutoModel._model_mapping[type(config)]` is the bare encoder class `AutoModel` builds for a
  config (`encoder_class`: its constructor says whether it takes `add_pooling_layer`);
- `config._attn_implementation` names the attention a model runs (`attention_of`), and a
  model without `set_attn_implementation` (transformers 4.x) switches by assigning it
  (`set_attention`);
- `transformers.integrations.sdpa_attention.sdpa_attention_forward` is the `sdpa` attention
  function, with the signature of an `AttentionInterface` entry (`sdpa_attention`);
- `transformers.masking_utils.AttentionMaskInterface` holds the padding-mask builder of each
  attention name, `sdpa_mask` is sdpa's, and an attention name without one gets no mask
  (`register_attention` registers both for a new name).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn
from transformers import AutoModel, PretrainedConfig


def encoder_class(config: PretrainedConfig) -> type:
    """The class `AutoModel.from_config(config)` builds."""
    return AutoModel._model_mapping[type(config)]


def attention_of(config: PretrainedConfig | None) -> str | None:
    """The attention implementation a model with this config runs (None: no config)."""
    return getattr(config, "_attn_implementation", None)


def set_attention(model: nn.Module, name: str) -> None:
    """Switch a model's attention implementation, in transformers 4.x and 5 alike."""
    setter = getattr(model, "set_attn_implementation", None)
    if setter is None:  # transformers 4.x: its sdpa classes fall back to eager on request
        model.config._attn_implementation = name
    else:
        setter(name)


def sdpa_attention() -> Callable[..., Any]:
    """transformers' own `sdpa` attention function."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward


def register_attention(name: str, function: Callable[..., Any]) -> None:
    """Make `name` an attention implementation that runs `function` with sdpa's padding mask
    (transformers builds none for an attention name it has no mask function for, and every
    token would then attend to the padding)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(name, function)
    AttentionMaskInterface.register(name, sdpa_mask)
