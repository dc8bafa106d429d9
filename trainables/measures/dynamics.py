"""How far each encoder layer moved during fine-tuning, measured against the pretrained encoder.

Three views, because each can miss what another sees: weight distance (did the parameters
move), attention divergence (does the layer route information differently) and representation
similarity (does it compute different features, up to rotation and scale). All are taken on one
fixed dev sample, so every arm and seed is measured on the same sentences.

Pure PyTorch and NumPy, so a trainable can call it and tests can run it without Ray or MLflow.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping

import numpy as np
import torch
from torch import nn

from trainables.data.batching import collate
from trainables.data.encoding import EncodedSplit
from trainables.errors import ModelError

# CKA and SVCCA are in trainables/measures/similarity.py (no torch), shared with the report; their
# names stay importable from here
from trainables.measures.similarity import (  # noqa: F401
    SVCCA_VARIANCE,
    compare_prepared,
    linear_cka,
    prepare,
    svcca_distance,
)
from trainables.model import hf_internals, surgery
from trainables.settings import layouts

WEIGHT_PARTS = ("query", "key", "value", "attn_out", "ffn_in", "ffn_out")

Batch = Mapping[str, torch.Tensor]


# --- weights ------------------------------------------------------------------------------


def _check_pair(encoder: nn.Module, reference: nn.Module) -> str:
    """A fine-tuned encoder may be truncated, never deeper or of another family than its
    reference: then layer i would be compared with an unrelated layer."""
    model_type, reference_type = surgery.encoder_family(encoder), surgery.encoder_family(reference)
    if model_type != reference_type:
        raise ModelError(f"cannot compare a {model_type} encoder with a {reference_type} one")
    depth, total = surgery.num_blocks(encoder), surgery.num_blocks(reference)
    if depth > total:
        raise ModelError(f"the encoder has {depth} blocks but its reference only {total}")
    return model_type


def _block_matrices(block: nn.Module, model_type: str) -> list[torch.Tensor]:
    """Q, K, V (a fused QKV Linear's thirds), out, and the feed-forward in and out matrices."""
    *qkv, out = surgery.attention_parts(block, model_type)
    ffn = [block.get_submodule(path) for path in layouts.layout_of(model_type).feed_forward]
    return [part.weight for part in qkv] + [linear.weight for linear in (out, *ffn)]


def _distance(tuned: torch.Tensor, pretrained: torch.Tensor) -> float:
    if tuned.shape != pretrained.shape:
        raise ModelError(f"weight shapes differ: {tuple(tuned.shape)} vs {tuple(pretrained.shape)}")
    diff = tuned.float() - pretrained.to(tuned.device).float()
    return float(torch.linalg.vector_norm(diff))


def weight_distances(encoder: nn.Module, reference: nn.Module) -> dict[str, list[float]]:
    """Frobenius distance from the pretrained weights per block, kept per matrix because
    attention and feed-forward weights can move very differently."""
    model_type = _check_pair(encoder, reference)
    out: dict[str, list[float]] = {f"l2_{part}": [] for part in (*WEIGHT_PARTS, "sum")}
    pairs = zip(surgery.encoder_blocks(encoder), surgery.encoder_blocks(reference), strict=False)
    with torch.no_grad():
        for tuned, pretrained in pairs:
            distances = [
                _distance(a, b)
                for a, b in zip(
                    _block_matrices(tuned, model_type),
                    _block_matrices(pretrained, model_type),
                    strict=True,
                )
            ]
            for part, value in zip(WEIGHT_PARTS, distances, strict=True):
                out[f"l2_{part}"].append(value)
            out["l2_sum"].append(sum(distances))
    return out


# --- forward passes -----------------------------------------------------------------------


@contextlib.contextmanager
def _eager_attention(model: nn.Module) -> Iterator[None]:
    """transformers 5 returns attention probabilities only from the eager implementation."""
    previous = hf_internals.attention_of(model.config)
    if previous == "eager":
        yield
        return
    hf_internals.set_attention(model, "eager")
    try:
        yield
    finally:
        hf_internals.set_attention(model, previous)


@contextlib.contextmanager
def _blocks_own_outputs(model: nn.Module) -> Iterator[None]:
    """transformers 5 puts the encoder's final output in place of the top block's in
    `hidden_states`; with a norm after the blocks (ModernBERT) that would compare a normed
    state of a truncated encoder with an un-normed one of its reference, so here every hidden
    state after the embeddings is its block's own output, in every family."""
    config, unset = model.config, object()
    previous = getattr(config, "tie_last_hidden_states", unset)
    config.tie_last_hidden_states = False
    try:
        yield
    finally:
        if previous is unset:
            del config.tie_last_hidden_states
        else:
            config.tie_last_hidden_states = previous


@contextlib.contextmanager
def _measuring(model: nn.Module) -> Iterator[None]:
    """Eval mode (no dropout noise in the measurement), restoring each module's own mode after,
    since a probing tagger keeps its encoder in eval mode while the rest trains."""
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        with _eager_attention(model), _blocks_own_outputs(model), torch.no_grad():
            yield
    finally:
        for module, mode in modes:
            module.training = mode


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _run(model: nn.Module, batch: Batch) -> tuple[tuple[torch.Tensor, ...], ...]:
    device = _device(model)
    out = model(
        input_ids=batch["input_ids"].to(device),
        attention_mask=batch["attention_mask"].to(device),
        output_attentions=True,
        output_hidden_states=True,
    )
    if not out.attentions:
        raise ModelError(f"{type(model).__name__} returned no attention probabilities")
    return out.attentions, out.hidden_states


def encoder_outputs(
    encoder: nn.Module, batches: Iterable[Batch]
) -> Iterator[tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...], torch.Tensor]]:
    """Per batch: the attention probabilities of every block, the hidden states (0 =
    embeddings) and the batch's attention mask, measured as the dynamics measure (eval mode,
    eager attention, no gradients; the model's modes come back after)."""
    with _measuring(encoder):
        for batch in batches:
            attentions, hidden = _run(encoder, batch)
            yield attentions, hidden, batch["attention_mask"]


# --- attention ----------------------------------------------------------------------------


def js_divergence(p: torch.Tensor, q: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Jensen-Shannon divergence in nats: symmetric and bounded by ln 2, unlike KL, so layers
    whose attention became (near) disjoint from the pretrained one stay comparable."""
    dtype = torch.float32 if p.device.type == "mps" else torch.float64
    p, q = p.to(dtype), q.to(device=p.device, dtype=dtype)
    m = (p + q) / 2
    # xlogy gives 0 where a probability is 0, the limit of p log p, instead of NaN.
    kl_p = (torch.xlogy(p, p) - torch.xlogy(p, m)).sum(dim)
    kl_q = (torch.xlogy(q, q) - torch.xlogy(q, m)).sum(dim)
    return ((kl_p + kl_q) / 2).clamp(0.0, math.log(2))


def _over_real_keys(attention: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Probabilities over non-padding keys only, so padding can never count as a difference."""
    kept = attention.double() * mask[:, None, None, :].to(attention.device, torch.float64)
    return kept / kept.sum(-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)


def _sentence_js(
    tuned: tuple[torch.Tensor, ...], pretrained: tuple[torch.Tensor, ...], mask: torch.Tensor
) -> torch.Tensor:
    """Per sentence (rows) and layer (columns): JS averaged over heads and real query tokens."""
    device = tuned[0].device
    mask = mask.to(device)
    queries = mask.to(torch.float64)
    per_layer = []
    for t, p in zip(tuned, pretrained, strict=True):
        js = js_divergence(_over_real_keys(t, mask), _over_real_keys(p.to(device), mask)).mean(1)
        per_layer.append((js * queries).sum(-1) / queries.sum(-1).clamp_min(1.0))
    return torch.stack(per_layer, 1)[mask.sum(-1) > 0].cpu()


# --- hidden states ------------------------------------------------------------------------


def _token_rows(hidden: tuple[torch.Tensor, ...], mask: torch.Tensor) -> list[np.ndarray]:
    keep = mask.to(hidden[0].device).bool()
    return [h[keep].float().cpu().numpy() for h in hidden]


def _similarities(
    tuned: list[list[np.ndarray]], pretrained: list[list[np.ndarray]]
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"cka": [], "svcca": []}
    for layer in range(len(tuned[0])):
        x = np.concatenate([rows[layer] for rows in tuned])
        y = np.concatenate([rows[layer] for rows in pretrained])
        cka, svcca = compare_prepared(prepare(x), prepare(y))
        out["cka"].append(cka)
        out["svcca"].append(svcca)
    return out


# --- entry points -------------------------------------------------------------------------


def _compare(
    encoder: nn.Module, reference: nn.Module, batches: Iterable[Batch]
) -> tuple[list[float], list[list[np.ndarray]], list[list[np.ndarray]]]:
    """One forward pass of each model per batch feeds both the attention and hidden views."""
    _check_pair(encoder, reference)
    js_rows, tuned_rows, pretrained_rows = [], [], []
    with _measuring(encoder), _measuring(reference):
        for batch in batches:
            tuned_attn, tuned_hidden = _run(encoder, batch)
            pre_attn, pre_hidden = _run(reference, batch)
            mask = batch["attention_mask"]
            js_rows.append(_sentence_js(tuned_attn, pre_attn[: len(tuned_attn)], mask))
            tuned_rows.append(_token_rows(tuned_hidden, mask))
            pretrained_rows.append(_token_rows(pre_hidden[: len(tuned_hidden)], mask))
    if not js_rows:
        raise ValueError("layer dynamics need at least one batch")
    return torch.cat(js_rows).mean(0).tolist(), tuned_rows, pretrained_rows


def attention_js(encoder: nn.Module, reference: nn.Module, batches: Iterable[Batch]) -> list[float]:
    """Per block: how differently the fine-tuned heads distribute attention, averaged over heads,
    real query tokens, then sentences (so long sentences do not dominate)."""
    return _compare(encoder, reference, batches)[0]


def hidden_similarity(
    encoder: nn.Module, reference: nn.Module, batches: Iterable[Batch]
) -> dict[str, list[float]]:
    """Per hidden state (0 = embeddings, i = output of block i), over all real tokens pooled:
    `cka` (1 = unchanged) and `svcca` distance (0 = unchanged)."""
    _, tuned, pretrained = _compare(encoder, reference, batches)
    return _similarities(tuned, pretrained)


def layer_dynamics(
    encoder: nn.Module, reference: nn.Module, batches: Iterable[Batch]
) -> dict[str, list[float]]:
    """All per-layer views in one pass: `l2_*` and `attn_js` per block, `cka` and `svcca` per
    hidden state. A truncated encoder is compared on the blocks it kept. Each model runs on its
    own device in eval mode, and both get their modes and attention implementation back."""
    js, tuned, pretrained = _compare(encoder, reference, batches)
    return {
        **weight_distances(encoder, reference),
        "attn_js": js,
        **_similarities(tuned, pretrained),
    }


def dev_sample(
    split: EncodedSplit, pad_id: int, n: int = 32, batch_size: int = 8
) -> list[dict[str, torch.Tensor]]:
    """The first `n` dev windows in corpus order, independent of the seed and of the training
    data fraction, so dynamics of different arms and seeds are measured on the same tokens."""
    if n < 1 or batch_size < 1:
        raise ValueError(f"n {n} and batch_size {batch_size} must be at least 1")
    windows = split.windows[:n]
    chunks = [windows[i : i + batch_size] for i in range(0, len(windows), batch_size)]
    return [_model_inputs(collate(chunk, pad_id)) for chunk in chunks]


def _model_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # Labels are not needed to measure an encoder, and dropping them lets `encoder(**batch)` work.
    return {key: batch[key] for key in ("input_ids", "attention_mask")}
