"""Where each supported encoder family keeps its blocks, attention projections and feed-forward
matrices, and what its config calls the layer and head counts. Free of torch so that a study
file can be checked against a model's config without loading either."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainables.errors import ModelError

# `full` is every block, `full-N` all but the top N: a study can say "remove the last block"
# without knowing the model's layer count on the machine that plans it
_RELATIVE_DEPTH = re.compile(r"full(?:\s*-\s*(\d+))?")
DEPTH_FORMS = "'full' or 'full-N'"


class DepthError(ValueError):
    """A depth written in none of its forms; each reader words its own error."""


def depth_cut(depth: str) -> int:
    """How many top blocks a depth written `full` (0) or `full-N` (N >= 1) removes: the one
    reading of those forms, for the study file, the synthetic surface and the surgery."""
    match = _RELATIVE_DEPTH.fullmatch(depth.strip())
    if match is None or (match.group(1) is not None and int(match.group(1)) < 1):
        raise DepthError(depth)
    return int(match.group(1) or 0)


def blocks_kept(depth: int | str | None, total: int) -> int:
    """The blocks `depth` keeps of an encoder with `total`: null and `full` all of them,
    `full-N` all but the top N, a number that many (whether it fits is the caller's check)."""
    if depth is None:
        return total
    if isinstance(depth, str):
        return total - depth_cut(depth)
    return depth


@dataclass(frozen=True)
class Layout:
    """Where a family keeps its blocks and their matrices, and its config field names.

    `projections` are q, k, v and out, dotted paths inside one block. A family with a fused
    QKV projection (`fused_qkv`) names its one Linear three times: Q, K and V are then the
    first, second and third thirds of that Linear's output rows, in that order, as the
    family's attention splits them. `after_blocks` are modules applied to the top block's
    output (ModernBERT's final norm): part of the top of the stack, not of the embedding
    stage. `per_layer_fields` are config lists with one entry per block, cut by `depth`.

    `positions_field` names the size of the family's table of absolute positions (None: its
    positions are relative or rotary, with no table to run past); `positions_switch`, a
    config flag that turns the table off (DeBERTa-v2's `position_biased_input`, on unless it
    says false); `positions_after_pad`, that position ids count on from `pad_token_id + 1`
    (RoBERTa's), so the table holds that many fewer tokens. `longest_window` reads them.
    """

    blocks: tuple[str, ...]  # attribute path from the model to the ModuleList of blocks
    projections: tuple[str, str, str, str]
    feed_forward: tuple[str, str]  # in, out: dotted paths inside one block
    layers_field: str = "num_hidden_layers"
    heads_field: str = "num_attention_heads"
    fused_qkv: bool = False
    after_blocks: tuple[str, ...] = ()
    per_layer_fields: tuple[str, ...] = ()
    positions_field: str | None = "max_position_embeddings"
    positions_switch: str | None = None
    positions_after_pad: bool = False

    def fields(self) -> tuple[str, str]:
        return self.layers_field, self.heads_field

    def position_fields(self) -> tuple[str, ...]:
        """The config fields `longest_window` reads for this family."""
        names = (self.positions_field, self.positions_switch)
        pad = ("pad_token_id",) if self.positions_after_pad else ()
        return tuple(n for n in names if n) + pad


BERT_LIKE = Layout(
    blocks=("encoder", "layer"),
    projections=(
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
    ),
    feed_forward=("intermediate.dense", "output.dense"),
)

ROBERTA_LIKE = dataclasses.replace(BERT_LIKE, positions_after_pad=True)

LAYOUTS: dict[str, Layout] = {
    "bert": BERT_LIKE,
    "roberta": ROBERTA_LIKE,
    "xlm-roberta": ROBERTA_LIKE,
    "electra": BERT_LIKE,
    "deberta-v2": Layout(
        blocks=("encoder", "layer"),
        projections=(
            "attention.self.query_proj",
            "attention.self.key_proj",
            "attention.self.value_proj",
            "attention.output.dense",
        ),
        feed_forward=("intermediate.dense", "output.dense"),
        positions_switch="position_biased_input",
    ),
    "distilbert": Layout(
        blocks=("transformer", "layer"),
        projections=(
            "attention.q_lin",
            "attention.k_lin",
            "attention.v_lin",
            "attention.out_lin",
        ),
        feed_forward=("ffn.lin1", "ffn.lin2"),
        layers_field="n_layers",
        heads_field="n_heads",
    ),
    # ModernBERT and the multilingual encoders built on it (same model type): pre-norm blocks
    # with one fused QKV projection, a gated feed-forward (`Wi` holds input and gate), rotary
    # positions, alternating global and sliding-window attention, and a final norm
    "modernbert": Layout(
        blocks=("layers",),
        projections=("attn.Wqkv", "attn.Wqkv", "attn.Wqkv", "attn.Wo"),
        feed_forward=("mlp.Wi", "mlp.Wo"),
        fused_qkv=True,
        after_blocks=("final_norm",),
        per_layer_fields=("layer_types",),
        positions_field=None,
    ),
}

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(LAYOUTS)


def layout_of(model_type: str) -> Layout:
    try:
        return LAYOUTS[model_type]
    except KeyError:
        raise ModelError(
            f"model type {model_type!r} is not supported for layer surgery; "
            f"supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        ) from None


def longest_window(config: Mapping[str, Any]) -> int | None:
    """The most sub-words, special tokens included, that one window may hold on a model of
    this config (a config.json's fields): past its table of absolute positions, the encoder's
    embeddings fail in every trial. None where there is no such table or the config does not
    say: the family's positions are relative or rotary, or a field is missing."""
    layout = LAYOUTS.get(config.get("model_type"))  # type: ignore[arg-type]
    if layout is None or layout.positions_field is None:
        return None
    if layout.positions_switch and config.get(layout.positions_switch, True) is False:
        return None
    size, pad = config.get(layout.positions_field), config.get("pad_token_id")
    if not _count(size) or (layout.positions_after_pad and not _count(pad)):
        return None
    return size - (pad + 1 if layout.positions_after_pad else 0)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
