"""Where each supported encoder family keeps its blocks and attention projections, and what its
config calls the layer and head counts. Free of torch so that a study file can be checked
against a model's config without loading either."""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainables.errors import ModelError

# `full` is every block, `full-N` all but the top N: a study can say "remove the last block"
# without knowing the model's layer count on the machine that plans it
RELATIVE_DEPTH = re.compile(r"full(?:\s*-\s*(\d+))?")
DEPTH_FORMS = "'full' or 'full-N'"


@dataclass(frozen=True)
class Layout:
    """Where a family keeps its blocks and attention projections, and its config field names."""

    blocks: tuple[str, ...]  # attribute path from the model to the ModuleList of blocks
    projections: tuple[str, str, str, str]  # q, k, v, out: dotted paths inside one block
    layers_field: str
    heads_field: str

    def fields(self) -> tuple[str, str]:
        return self.layers_field, self.heads_field


BERT_LIKE = Layout(
    blocks=("encoder", "layer"),
    projections=(
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
    ),
    layers_field="num_hidden_layers",
    heads_field="num_attention_heads",
)

LAYOUTS: dict[str, Layout] = {
    "bert": BERT_LIKE,
    "roberta": BERT_LIKE,
    "xlm-roberta": BERT_LIKE,
    "electra": BERT_LIKE,
    "deberta-v2": Layout(
        blocks=("encoder", "layer"),
        projections=(
            "attention.self.query_proj",
            "attention.self.key_proj",
            "attention.self.value_proj",
            "attention.output.dense",
        ),
        layers_field="num_hidden_layers",
        heads_field="num_attention_heads",
    ),
    "distilbert": Layout(
        blocks=("transformer", "layer"),
        projections=(
            "attention.q_lin",
            "attention.k_lin",
            "attention.v_lin",
            "attention.out_lin",
        ),
        layers_field="n_layers",
        heads_field="n_heads",
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
