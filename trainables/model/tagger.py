"""A token-classification tagger: a (possibly altered) pretrained encoder and one linear head.

Built here rather than with `AutoModelForTokenClassification` so that every arm of the study
(truncation, re-initialisation, freezing, probing) is applied the same way for every encoder
family, and every random draw comes from one seeded generator.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from trainables.errors import ModelError
from trainables.hub import cache_only_if_unreachable, load_failure
from trainables.model import hf_internals, surgery, tiny
from trainables.model.dropout import use_mask_attention_dropout, use_mask_dropout
from trainables.model.embedding_gradient import use_row_gradient_embeddings
from trainables.model.quiet import quiet_transformers
from trainables.settings.config import Architecture, TrialConfig
from trainables.settings.model_source import (  # noqa: F401 - EMBEDDED_MODEL re-exported
    EMBEDDED_MODEL,
    TINY_MODEL,
    resolve_model,
)

IGNORE_INDEX = -100


@contextlib.contextmanager
def _loading(part: str, name: str, unreachable: str | None) -> Iterator[None]:
    """The loaders' failures (transformers raises these three kinds for a missing, private or
    malformed model) as one line naming the part that failed."""
    try:
        yield
    except (OSError, ValueError, KeyError) as err:
        why = load_failure(err, unreachable)
        raise ModelError(f"cannot load the {part} of model {name!r}: {why}") from err


def _model_kwargs(config: PretrainedConfig) -> dict[str, bool]:
    # The pooler is unused by a tagger and would only add untrained parameters and warnings.
    model_class = hf_internals.encoder_class(config)
    params = inspect.signature(model_class.__init__).parameters
    return {"add_pooling_layer": False} if "add_pooling_layer" in params else {}


# Byte-level BPE tokenizers must be told that pre-split words are preceded by a space,
# otherwise every word is encoded as if it were glued to the previous one.
NEEDS_PREFIX_SPACE = ("roberta",)


def _checked_tokenizer(tokenizer: PreTrainedTokenizerBase, name: str) -> PreTrainedTokenizerBase:
    if not getattr(tokenizer, "is_fast", False):
        raise ModelError(
            f"model {name!r} has a slow tokenizer ({type(tokenizer).__name__}); a fast tokenizer "
            "is needed to align words and sub-words"
        )
    _space_before_each_word(tokenizer)
    return tokenizer


def _space_before_each_word(tokenizer: PreTrainedTokenizerBase) -> None:
    """A generic fast tokenizer (ModernBERT's) ignores `add_prefix_space`, so a byte-level
    pre-tokenizer would encode every pre-split word as if glued to the previous one (`paris`,
    not `Ġparis`): the prefix space is switched on in the pre-tokenizer itself."""
    from tokenizers import pre_tokenizers

    pre = getattr(getattr(tokenizer, "backend_tokenizer", None), "pre_tokenizer", None)
    parts = list(pre) if isinstance(pre, pre_tokenizers.Sequence) else [pre]
    for part in parts:
        if isinstance(part, pre_tokenizers.ByteLevel) and not part.add_prefix_space:
            part.add_prefix_space = True


def model_folder(name_or_path: str) -> str:
    """What `from_pretrained` reads for the user's model argument; the `tiny` model is built
    here, in the trial, the first time (settings' `resolve_model` stays torch-free)."""
    if name_or_path == TINY_MODEL:
        return tiny.embedded_tiny_folder()
    return resolve_model(name_or_path)


def load_encoder(
    name_or_path: str, revision: str | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a bare encoder and its fast tokenizer, rejecting unsupported families before the
    (possibly large) weights are read, and turning loader failures into one-line user errors.
    `revision` pins a hub model's commit, tag or branch; transformers reads a local folder as
    it is and ignores it. Where the hub cannot be reached, a hub model comes from the cache
    at once (trainables.hub) rather than after half a minute of retries."""
    resolved = model_folder(name_or_path)
    with cache_only_if_unreachable(resolved) as unreachable:
        with _loading("config", name_or_path, unreachable):
            config = AutoConfig.from_pretrained(resolved, revision=revision)
        surgery.check_model_type(config.model_type)
        with _loading("weights", name_or_path, unreachable), quiet_transformers():
            model = AutoModel.from_pretrained(
                resolved, config=config, revision=revision, **_model_kwargs(config)
            )
        prefix_space = {"add_prefix_space": True} if config.model_type in NEEDS_PREFIX_SPACE else {}
        with _loading("tokenizer", name_or_path, unreachable):
            tokenizer = AutoTokenizer.from_pretrained(resolved, revision=revision, **prefix_space)
    return model, _checked_tokenizer(tokenizer, name_or_path)


class Tagger(nn.Module):
    """Encoder plus a linear head over every sub-word position.

    In probe mode the encoder is frozen and kept in eval mode even when the tagger trains, so a
    probe measures fixed pretrained features rather than features perturbed by dropout.
    """

    def __init__(
        self,
        encoder: PreTrainedModel,
        num_labels: int,
        dropout: float,
        generator: torch.Generator,
        *,
        probe: bool = False,
    ) -> None:
        super().__init__()
        if num_labels < 1:
            raise ModelError(f"num_labels {num_labels} must be at least 1")
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.config.hidden_size, num_labels)
        with torch.no_grad():
            self.head.weight.normal_(0.0, 0.02, generator=generator)
            self.head.bias.zero_()
        self.probe = probe
        if probe:
            self.encoder.requires_grad_(False)
        # `from_pretrained` returns the encoder in eval mode; start uniformly in training mode,
        # as a new nn.Module does, so the encoder's dropout is not silently off.
        self.train()

    @property
    def num_labels(self) -> int:
        return self.head.out_features

    def train(self, mode: bool = True) -> Tagger:
        super().train(mode)
        if self.probe:
            self.encoder.eval()
        return self

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        labels: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        logits = self.head(self.dropout(hidden))
        loss = None if labels is None else token_loss(logits, labels)
        return logits, loss


def token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over labelled positions; a batch with none gives 0 rather than NaN so
    one unlabelled batch cannot abort a run as diverged."""
    flat_logits, flat_labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
    if not bool((flat_labels != IGNORE_INDEX).any()):
        return flat_logits.sum() * 0.0
    return F.cross_entropy(flat_logits, flat_labels, ignore_index=IGNORE_INDEX)


def _freeze(encoder: PreTrainedModel, freeze: str | int | None) -> None:
    if freeze is None:
        return
    total = surgery.num_blocks(encoder)
    if freeze == "embeddings":
        n = 0
    elif isinstance(freeze, int) and not isinstance(freeze, bool) and 0 <= freeze <= total:
        n = freeze
    else:
        raise ModelError(
            f"freeze {freeze!r} must be 'embeddings' or a block count in 0..{total} "
            f"for this {total}-layer {encoder.config.model_type} encoder"
        )
    for param in surgery.embedding_stage_parameters(encoder):
        param.requires_grad_(False)
    for block in list(surgery.encoder_blocks(encoder))[:n]:
        block.requires_grad_(False)


def build_tagger(
    model: str,
    num_labels: int,
    *,
    generator: torch.Generator,
    architecture: Architecture | None = None,
    revision: str | None = None,
) -> tuple[Tagger, PreTrainedTokenizerBase]:
    """Build one study arm from its `architecture` (`TrialConfig.architecture()`; None: the
    defaults). Surgery and head init draw from `generator` in a fixed order (truncate,
    reinit_from, reinit_heads, head), so one seed fixes every random weight of the trial.

    Freezing: "embeddings" freezes the embedding stage (embeddings, ELECTRA's embedding
    projection, DeBERTa's shared relative-position embeddings; not ModernBERT's final norm,
    which sits on top of the blocks); an int n also freezes blocks 0..n-1; `probe` freezes
    the whole encoder and keeps it in eval mode.
    """
    arch = TrialConfig().architecture() if architecture is None else architecture
    encoder, tokenizer = load_encoder(model, revision)
    if arch.depth is not None:
        surgery.truncate(encoder, arch.depth)
    if arch.reinit_from is not None:
        surgery.reinit_from(encoder, arch.reinit_from, generator, std=arch.reinit_std)
    if arch.reinit_heads:
        surgery.reinit_heads(encoder, list(arch.reinit_heads), generator, std=arch.reinit_std)
    tagger = Tagger(encoder, num_labels, arch.dropout, generator, probe=arch.probe)
    _freeze(tagger.encoder, arch.freeze)
    use_mask_dropout(tagger)  # cheaper masks on CPU, same keep rule (trainables/model/dropout.py)
    use_mask_attention_dropout(tagger.encoder)
    use_row_gradient_embeddings(tagger)  # no dense zero fill of a table's gradient per step
    return tagger, tokenizer


def _no_decay(module: nn.Module, param_name: str) -> bool:
    return param_name == "bias" or surgery.is_layer_norm(module)


def param_groups(
    tagger: Tagger, lr: float, head_lr: float | None, weight_decay: float
) -> list[dict]:
    """AdamW groups: the head may learn faster than the pretrained encoder, and biases and
    LayerNorm weights are not decayed (decaying them pulls scales toward 0, which hurts)."""
    head_lr = lr if head_lr is None else head_lr
    groups: dict[tuple[str, bool], list[nn.Parameter]] = {
        ("encoder", True): [],
        ("encoder", False): [],
        ("head", True): [],
        ("head", False): [],
    }
    seen: set[int] = set()  # a tied parameter must sit in one group only
    for part in ("encoder", "head"):
        for module in getattr(tagger, part).modules():
            for name, param in module.named_parameters(recurse=False):
                if param.requires_grad and id(param) not in seen:
                    seen.add(id(param))
                    groups[(part, not _no_decay(module, name))].append(param)
    return [
        {
            "name": f"{part}{'' if decay else '_no_decay'}",
            "params": params,
            "lr": head_lr if part == "head" else lr,
            "weight_decay": weight_decay if decay else 0.0,
        }
        for (part, decay), params in groups.items()
        if params
    ]
