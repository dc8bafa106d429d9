"""Layer surgery on a bare Hugging Face encoder: truncate, re-initialise blocks or single heads.

The study asks how much of a pretrained encoder a tagger needs, so these operations must leave
everything they do not target bit-identical, and must be reproducible from a seeded
`torch.Generator` alone (never the global RNG), so one seed fixes a whole trial.

Only the encoder families listed in `trainables.settings.layouts.LAYOUTS` are supported; guessing at
an unknown layout could silently operate on the wrong modules.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from trainables.errors import ModelError
from trainables.settings.layouts import (  # noqa: F401 - SUPPORTED_MODEL_TYPES re-exported
    DEPTH_FORMS,
    SUPPORTED_MODEL_TYPES,
    DepthError,
    blocks_kept,
    layout_of,
)

# A truncated normal cut at +-2 std has a smaller spread than `std`; tests and reports use this.
TRUNC_STD_FACTOR = 0.8796256610342398


def check_model_type(model_type: str) -> None:
    """Fail early (before weights are loaded) for encoder families whose layout we do not know."""
    layout_of(model_type)


def encoder_family(model: nn.Module) -> str:
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if not model_type:
        raise ModelError(f"{type(model).__name__} has no config.model_type; expected an HF encoder")
    return model_type


def encoder_blocks(model: nn.Module) -> nn.ModuleList:
    """The transformer blocks in order, so callers need not know each family's layout."""
    module: nn.Module = model
    for name in layout_of(encoder_family(model)).blocks:
        module = getattr(module, name)
    if not isinstance(module, nn.ModuleList):
        raise ModelError(f"{type(model).__name__}: expected a ModuleList of blocks, got {module}")
    return module


def num_blocks(model: nn.Module) -> int:
    """Blocks actually present: after truncation this is fewer than the pretrained count."""
    return len(encoder_blocks(model))


def _num_heads(model: nn.Module) -> int:
    return int(getattr(model.config, layout_of(encoder_family(model)).heads_field))


@dataclass(frozen=True)
class Projection:
    """Q, K or V of one block: a Linear, or its third of a fused QKV Linear's output rows.

    Head h of a projection with n heads is rows [h*d, (h+1)*d) of `rows`, d = len(rows) / n:
    the attention reshapes the projection's output to (heads, d), head-major, in every
    supported family, the fused QKV one (ModernBERT) included after its split into thirds.
    """

    linear: nn.Linear
    rows: slice

    @property
    def weight(self) -> torch.Tensor:
        return self.linear.weight[self.rows]

    def head_rows(self, head: int, n_heads: int) -> slice:
        size = (self.rows.stop - self.rows.start) // n_heads
        start = self.rows.start + head * size
        return slice(start, start + size)


def attention_parts(
    block: nn.Module, model_type: str
) -> tuple[Projection, Projection, Projection, nn.Linear]:
    """Q, K and V projections and the output projection of one block, the unit that head
    surgery and the weight distances of layer dynamics operate on."""
    layout = layout_of(model_type)
    linears = [block.get_submodule(path) for path in layout.projections]
    for path, module in zip(layout.projections, linears, strict=True):
        if not isinstance(module, nn.Linear):
            raise ModelError(f"{model_type} block: {path} is {type(module).__name__}, not Linear")
    *qkv, out = linears
    if not layout.fused_qkv:
        return (*(Projection(linear, slice(0, linear.out_features)) for linear in qkv), out)
    third = qkv[0].out_features // 3
    q, k, v = (Projection(qkv[0], slice(i * third, (i + 1) * third)) for i in range(3))
    return q, k, v, out


def truncate(model: nn.Module, depth: int | str) -> None:
    """Keep the first `depth` blocks in place, so the top hidden state is the full model's layer
    `depth` output; the config's layer count follows so a saved model reloads with that depth.

    Everything outside the blocks (embeddings, DeBERTa's shared relative-position embeddings and
    its convolution after block 0) is kept, since the retained blocks depend on it. So is a
    family's norm after the blocks (ModernBERT's `final_norm`): it then normalises block
    `depth`'s output, the full encoder's pre-norm `hidden_states[depth]`, so the head sees
    normalised features at every depth, as it does at full depth.
    """
    total = num_blocks(model)
    try:  # `full` is every block, `full-N` all but the top N (trainables/settings/layouts.py)
        depth = blocks_kept(depth, total)
    except DepthError:
        raise ModelError(f"depth {depth!r} must be a number, {DEPTH_FORMS}") from None
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= total:
        raise ModelError(
            f"depth {depth!r} is outside 1..{total} for this {total}-layer "
            f"{encoder_family(model)} encoder"
        )
    layout = layout_of(encoder_family(model))
    owner = model.get_submodule(".".join(layout.blocks[:-1]))
    setattr(owner, layout.blocks[-1], encoder_blocks(model)[:depth])
    if hasattr(owner, "n_layers"):  # DistilBERT's Transformer caches its own count
        owner.n_layers = depth
    setattr(model.config, layout.layers_field, depth)
    for name in layout.per_layer_fields:  # ModernBERT's global/sliding pattern per block
        setattr(model.config, name, list(getattr(model.config, name))[:depth])


def _trunc_normal_(tensor: torch.Tensor, std: float, generator: torch.Generator) -> None:
    # Inverse-CDF sampling driven only by `generator`, so draws never touch the global RNG.
    nn.init.trunc_normal_(tensor, mean=0.0, std=std, a=-2 * std, b=2 * std, generator=generator)


def is_layer_norm(module: nn.Module) -> bool:
    """Whether `module` is a LayerNorm, also when a family defines its own LayerNorm class."""
    # DeBERTa and others may define their own LayerNorm class; match by name as well as type.
    return isinstance(module, nn.LayerNorm) or type(module).__name__.endswith("LayerNorm")


def _reinit_module_params(module: nn.Module, std: float, generator: torch.Generator) -> None:
    if isinstance(module, nn.Linear):
        _trunc_normal_(module.weight, std, generator)
        if module.bias is not None:
            module.bias.zero_()
        return
    if is_layer_norm(module):
        if getattr(module, "weight", None) is not None:
            module.weight.fill_(1.0)
        if getattr(module, "bias", None) is not None:
            module.bias.zero_()
        return
    # Any other direct parameter (none in the supported families today): matrices are drawn like
    # Linear weights, vectors are zeroed like biases, so no pretrained value survives.
    for param in module.parameters(recurse=False):
        if param.dim() >= 2:
            _trunc_normal_(param, std, generator)
        else:
            param.zero_()


def _reinit_block(block: nn.Module, std: float, generator: torch.Generator) -> None:
    for module in block.modules():
        _reinit_module_params(module, std, generator)


def reinit_from(model: nn.Module, k: int, generator: torch.Generator, std: float = 0.02) -> None:
    """Replace blocks k..L-1 with fresh weights to test how much of the pretrained top is needed.

    Linear weights (including DeBERTa's relative-position projections when present) get a normal
    draw truncated at +-2 std, biases 0, LayerNorms 1/0. Parts shared across blocks and living
    outside them (embeddings, DeBERTa's relative-position embeddings and convolution) are left
    pretrained, since they also feed the blocks below k.
    """
    total = num_blocks(model)
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= total:
        raise ModelError(
            f"reinit_from {k!r} is outside 0..{total} for this {total}-layer "
            f"{encoder_family(model)} encoder"
        )
    with torch.no_grad():
        for block in list(encoder_blocks(model))[k:]:
            _reinit_block(block, std, generator)


def _check_heads(model: nn.Module, heads: list[tuple[int, int]]) -> None:
    total, n_heads = num_blocks(model), _num_heads(model)
    for layer, head in heads:
        if not 0 <= layer < total:
            raise ModelError(
                f"head ({layer}, {head}): layer {layer} is outside 0..{total - 1} for this "
                f"{total}-layer {encoder_family(model)} encoder"
            )
        if not 0 <= head < n_heads:
            raise ModelError(
                f"head ({layer}, {head}): head {head} is outside 0..{n_heads - 1} for this "
                f"{n_heads}-head {encoder_family(model)} encoder"
            )


def _fresh(shape: torch.Size, like: torch.Tensor, std: float, gen: torch.Generator) -> torch.Tensor:
    out = torch.empty(shape, dtype=like.dtype, device=like.device)
    _trunc_normal_(out, std, gen)
    return out


def _reinit_one_head(
    parts: tuple[Projection, Projection, Projection, nn.Linear],
    head: int,
    n_heads: int,
    std: float,
    generator: torch.Generator,
) -> None:
    *qkv, out = parts
    for part in qkv:
        rows = part.head_rows(head, n_heads)
        weight = part.linear.weight
        weight[rows] = _fresh(weight[rows].shape, weight, std, generator)
        if part.linear.bias is not None:
            part.linear.bias[rows] = 0.0
    d = out.in_features // n_heads
    cols = slice(head * d, (head + 1) * d)
    out.weight[:, cols] = _fresh(out.weight[:, cols].shape, out.weight, std, generator)


def reinit_heads(
    model: nn.Module,
    heads: list[tuple[int, int]],
    generator: torch.Generator,
    std: float = 0.02,
) -> None:
    """Re-draw single attention heads, to ask whether specific heads carry the pretrained value.

    A head is its rows of Q, K and V (biases zeroed) and its input columns of the output
    projection (whose bias is shared by all heads, so it is left alone); with a fused QKV
    Linear (ModernBERT's `Wqkv`, H heads of size d) those rows are h*d.., H*d + h*d.. and
    2*H*d + h*d.., d rows each (see `Projection`). All pairs are checked
    before any weight changes; pairs are processed in the given order, which fixes the draws.
    """
    heads = [(int(layer), int(head)) for layer, head in heads]
    _check_heads(model, heads)
    model_type, n_heads, blocks = encoder_family(model), _num_heads(model), encoder_blocks(model)
    with torch.no_grad():
        for layer, head in heads:
            parts = attention_parts(blocks[layer], model_type)
            _reinit_one_head(parts, head, n_heads, std, generator)


def embedding_stage_parameters(model: nn.Module) -> list[nn.Parameter]:
    """Parameters below the blocks and shared by them (embeddings, ELECTRA's projection,
    DeBERTa's relative-position embeddings), the "embedding stage" that freezing options treat
    as one unit. A norm after the blocks (ModernBERT's final norm) belongs to the top of the
    stack instead, and trains with the blocks that are not frozen."""
    layout = layout_of(encoder_family(model))
    above = [model.get_submodule(path) for path in layout.after_blocks]
    excluded = {id(p) for module in (encoder_blocks(model), *above) for p in module.parameters()}
    return [p for p in model.parameters() if id(p) not in excluded]
