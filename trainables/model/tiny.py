"""Tiny random-weight encoders and an offline word-piece tokenizer: the `tiny` model.

Used by the `smoke` study (a whole study in a few minutes, to check the machinery rather than
the science) and by the tests. Nothing here touches the network: models are built from configs and
the tokenizer from a hand-written vocabulary, deterministic per seed.
"""

from __future__ import annotations

import inspect
import os
import string
import tempfile
from pathlib import Path

import torch
from transformers import (
    AutoConfig,
    AutoModel,
    BertTokenizerFast,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)

from trainables.model.quiet import quiet_transformers
from trainables.settings.layouts import SUPPORTED_MODEL_TYPES
from trainables.settings.model_source import TINY_CONFIG

# every family the trainer supports, so that none drops out of the tests that use this list
MODEL_TYPES = SUPPORTED_MODEL_TYPES

HIDDEN = 32
INTERMEDIATE = 64
HEADS = TINY_CONFIG["num_attention_heads"]
VOCAB_SIZE = 100

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Whole words commonly used in NER fixtures, plus single characters and their ##-pieces so that
# any lowercase ASCII word or number splits into known sub-words (never [UNK]).
WORDS = [
    "the", "a", "of", "in", "and", "at", "to", "is", "lives", "works", "visited", "john",
    "smith", "mary", "new", "york", "paris", "london", "berlin", "google", "acme", "corp",
    "united", "nations", "play", "run", "walk",
]  # fmt: skip
SUFFIXES = ["##s", "##ed", "##ing", "##er", "##ly"]
CHARACTERS = list(string.ascii_lowercase + string.digits)
PUNCTUATION = list(".,;:!?'\"()-")
# Ordered and without repeats: a repeated line would give ids beyond the embedding table.
VOCAB = list(
    dict.fromkeys(
        SPECIAL_TOKENS
        + WORDS
        + SUFFIXES
        + CHARACTERS
        + ["##" + c for c in CHARACTERS]
        + PUNCTUATION
    )
)


# ModernBERT's defaults name token ids of its own 50k vocabulary; these are the tiny ones (the
# word-piece and byte-level vocabularies here both start with SPECIAL_TOKENS). A sliding window
# of 8 tokens makes its local-attention blocks (1 and 2 of 4) mask within test sentences.
_MODERNBERT = {
    "pad_token_id": 0,
    "cls_token_id": 2,
    "bos_token_id": 2,
    "sep_token_id": 3,
    "eos_token_id": 3,
    "local_attention": 8,
}


def tiny_config(model_type: str = "bert", layers: int = 4, **overrides: object) -> PretrainedConfig:
    """A config small enough that a forward pass takes milliseconds, shaped like the real family
    (DeBERTa-v2 uses the v3-style relative attention so its extra encoder parts are exercised)."""
    if model_type == "distilbert":
        base: dict[str, object] = {
            "n_layers": layers,
            "dim": HIDDEN,
            "hidden_dim": INTERMEDIATE,
            "n_heads": HEADS,
        }
    else:
        base = {
            "num_hidden_layers": layers,
            "hidden_size": HIDDEN,
            "intermediate_size": INTERMEDIATE,
            "num_attention_heads": HEADS,
        }
    base["vocab_size"] = VOCAB_SIZE
    base["max_position_embeddings"] = TINY_CONFIG["max_position_embeddings"]
    if model_type == "electra":
        base["embedding_size"] = HIDDEN // 2  # exercises ELECTRA's embedding projection
    if model_type == "modernbert":
        base.update(_MODERNBERT)
    if model_type == "deberta-v2":
        base.update(
            relative_attention=True,
            pos_att_type=["p2c", "c2p"],
            position_buckets=16,
            max_relative_positions=-1,
            norm_rel_ebd="layer_norm",
            position_biased_input=False,
            share_att_key=True,
            type_vocab_size=0,
        )
    base.update(overrides)
    return AutoConfig.for_model(model_type, **base)


def tiny_encoder(
    model_type: str = "bert", layers: int = 4, *, seed: int = 0, **overrides: object
) -> PreTrainedModel:
    """A bare random-weight encoder (the `AutoModel` class), in eval mode like `from_pretrained`.

    Weights depend only on `seed`; the global RNG state is left as it was.
    """
    config = tiny_config(model_type, layers, **overrides)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModel.from_config(config)
    return model.eval()


def tiny_tokenizer(folder: Path) -> BertTokenizerFast:
    """A fast lower-casing word-piece tokenizer over `VOCAB`, written to and read from `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab_file = folder / "vocab.txt"
    vocab_file.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    # transformers 5 takes the vocabulary as `vocab`; 4.x took `vocab_file`.
    params = inspect.signature(BertTokenizerFast.__init__).parameters
    key = "vocab" if "vocab" in params else "vocab_file"
    return BertTokenizerFast(**{key: str(vocab_file)}, do_lower_case=True)


def tiny_byte_level_tokenizer(folder: Path) -> PreTrainedTokenizerFast:
    """A cased byte-level BPE tokenizer shaped like ModernBERT's (no prefix space of its own,
    `[CLS] ... [SEP]` around a sentence), whole words of `WORDS` merged with and without their
    leading space; built by hand so that it is the same on every machine."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + alphabet)}
    merges: list[tuple[str, str]] = []
    for word in WORDS:
        for spelled in (word, "Ġ" + word):  # "Ġword": the word after a space
            merged = spelled[0]
        for char in spelled[1:]:
            if merged + char not in vocab:
                merges.append((merged, char))
                vocab[merged + char] = len(vocab)
            merged += char
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        **{f"{name}_token": f"[{name.upper()}]" for name in ("pad", "unk", "cls", "sep", "mask")},
    )
    folder.mkdir(parents=True, exist_ok=True)
    return tokenizer


# the tokenizer each family's tiny model folder gets: the word-piece one unless its own kind
# of tokenizer changes how words are encoded
TOKENIZERS = {"modernbert": tiny_byte_level_tokenizer}


def tiny_model_folder(
    tmp_path: Path, model_type: str = "bert", layers: int = 4, *, seed: int = 0
) -> Path:
    """Save a tiny encoder plus a fast tokenizer as a Hugging Face model folder, so loading code
    can be tested exactly as with a downloaded model, offline."""
    folder = Path(tmp_path) / f"tiny-{model_type}-{layers}"
    tokenizer = TOKENIZERS.get(model_type, tiny_tokenizer)(folder)
    model = tiny_encoder(
        model_type,
        layers,
        seed=seed,
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
    )
    with quiet_transformers():  # no progress bar in a trial's or a test's output
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


TINY_TYPE = TINY_CONFIG["model_type"]
TINY_LAYERS = TINY_CONFIG["num_hidden_layers"]


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ner-depth-study"


def embedded_tiny_folder() -> str:
    """The `tiny` model (BERT, 4 layers, 32 hidden, random weights from seed 0), built once into
    the user's cache. Built in a temporary folder and renamed, so concurrent trials that both
    find it missing never read half a folder."""
    target = cache_folder() / f"tiny-{TINY_TYPE}-{TINY_LAYERS}-v{len(VOCAB)}"
    if (target / "config.json").is_file():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = tiny_model_folder(Path(scratch), TINY_TYPE, TINY_LAYERS)
        try:
            os.replace(built, target)
        except OSError:
            if not (target / "config.json").is_file():  # lost a race only if it now exists
                raise
    return str(target)
