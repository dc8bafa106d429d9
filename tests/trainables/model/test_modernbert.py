"""ModernBERT (and the multilingual encoders that share its model type) in every operation, on a
tiny random ModernBERT built offline with a byte-level tokenizer shaped like its own: words
encoded as in running text, one head as its slices of the fused QKV projection, freezing around
the final norm, and whole trials through `python -m trainables`. The exactness tests every
family shares (truncation, re-initialisation, head slices, dynamics) run on it from
tests/trainables/model/test_surgery.py and tests/trainables/measures/test_dynamics.py; the
smoke-sized study is in tests/study/test_study_modernbert.py."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from tokenizers import pre_tokenizers
from torch import nn

from tests.study_helpers import REPO
from tests.tiny import (
    HEADS,
    HIDDEN,
    arch,
    sample_batch,
    tiny_config,
    tiny_encoder,
    tiny_model_folder,
)
from trainables.model import surgery
from trainables.model.tagger import build_tagger, load_encoder

NUM_LABELS = 5
D = HIDDEN // HEADS  # rows of one head in each of Q, K and V


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tiny_model_folder(tmp_path_factory.mktemp("modernbert"), "modernbert", layers=4)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def pieces(tokenizer, words: list[str]) -> list[str]:
    ids = tokenizer([words], is_split_into_words=True, add_special_tokens=False)["input_ids"][0]
    return tokenizer.convert_ids_to_tokens(ids)


# --- tokenizer ----------------------------------------------------------------------------


def test_each_pre_split_word_is_encoded_as_in_running_text(folder):
    _, tokenizer = load_encoder(str(folder))
    words = ["john", "lives", "in", "paris"]
    running = tokenizer(" " + " ".join(words), add_special_tokens=False)["input_ids"]
    assert pieces(tokenizer, words) == tokenizer.convert_ids_to_tokens(running)
    assert pieces(tokenizer, words) == ["Ġjohn", "Ġlives", "Ġin", "Ġparis"]


def test_a_byte_level_step_inside_a_sequence_gets_the_space_too(folder, tmp_path):
    _, tokenizer = load_encoder(str(folder))
    tokenizer.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    copy = tmp_path / "sequence"
    tokenizer.save_pretrained(copy)
    for name in ("config.json", "model.safetensors"):
        (copy / name).write_bytes((folder / name).read_bytes())
    _, reloaded = load_encoder(str(copy))
    assert pieces(reloaded, ["john", "smith"]) == ["Ġjohn", "Ġsmith"]


# --- single heads in the fused QKV projection ---------------------------------------------


def test_one_head_is_its_rows_of_each_third_of_wqkv_and_its_columns_of_wo():
    layer, head = 1, 2
    model = tiny_encoder("modernbert", 3)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    surgery.reinit_heads(model, [(layer, head)], gen(5))
    # Q, K and V are the thirds of Wqkv's rows; the head is D rows at head * D in each
    rows = [third * HIDDEN + head * D + i for third in range(3) for i in range(D)]
    columns = list(range(head * D, (head + 1) * D))
    for name, param in model.named_parameters():
        changed = param != before[name]
        if name == f"layers.{layer}.attn.Wqkv.weight":
            assert changed.any(1).nonzero().flatten().tolist() == rows
            assert changed[rows].all()  # every entry of the head's rows was re-drawn
        elif name == f"layers.{layer}.attn.Wo.weight":
            assert changed.any(0).nonzero().flatten().tolist() == columns
            assert changed[:, columns].all()
        else:
            assert not changed.any(), name


def test_a_re_drawn_head_changes_that_head_s_attention_only():
    """The slices are the ones the model's attention reads as that head: the other heads of
    the layer, and every layer below, attend exactly as before."""
    layer, head = 2, 1
    reference, model = tiny_encoder("modernbert", 3), tiny_encoder("modernbert", 3)
    surgery.reinit_heads(model, [(layer, head)], gen(1))
    input_ids, attention_mask = sample_batch(length=12)
    outputs = []
    for encoder in (reference, model):
        encoder.set_attn_implementation("eager")  # the one that returns attention probabilities
        with torch.no_grad():
            outputs.append(encoder(input_ids, attention_mask, output_attentions=True).attentions)
    before, after = outputs
    for below in range(layer):
        assert torch.equal(before[below], after[below])
    others = [h for h in range(HEADS) if h != head]
    assert torch.equal(before[layer][:, others], after[layer][:, others])
    assert not torch.allclose(before[layer][:, head], after[layer][:, head])


def test_head_draws_are_deterministic_per_seed():
    a, b, c = (tiny_encoder("modernbert", 2) for _ in range(3))
    for model, seed in ((a, 3), (b, 3), (c, 4)):
        surgery.reinit_heads(model, [(1, 0), (0, 3)], gen(seed))
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb), name
    assert not torch.equal(a.layers[1].attn.Wqkv.weight, c.layers[1].attn.Wqkv.weight)


# --- depth, freezing, probing -------------------------------------------------------------


def test_depth_keeps_the_final_norm_and_cuts_the_attention_pattern(folder):
    built, _ = build_tagger(
        str(folder), NUM_LABELS, generator=gen(), architecture=arch(depth="full-1")
    )
    encoder = built.encoder
    assert surgery.num_blocks(encoder) == 3 and encoder.config.num_hidden_layers == 3
    assert encoder.config.layer_types == ["full_attention", *["sliding_attention"] * 2]
    assert isinstance(encoder.final_norm, nn.LayerNorm)


def test_freezing_leaves_the_final_norm_with_the_top_blocks(folder):
    built, _ = build_tagger(str(folder), NUM_LABELS, generator=gen(), architecture=arch(freeze=2))
    encoder = built.encoder
    assert not any(p.requires_grad for p in encoder.embeddings.parameters())
    assert not any(p.requires_grad for b in encoder.layers[:2] for p in b.parameters())
    assert all(p.requires_grad for b in encoder.layers[2:] for p in b.parameters())
    assert encoder.final_norm.weight.requires_grad
    probe, _ = build_tagger(str(folder), NUM_LABELS, generator=gen(), architecture=arch(probe=True))
    assert not any(p.requires_grad for p in probe.encoder.parameters())


# --- whole trials through the command line ------------------------------------------------


def run_trial(tmp_path: Path, settings: dict) -> tuple[subprocess.CompletedProcess, dict]:
    config, metrics = tmp_path / "trial.yaml", tmp_path / "metrics.jsonl"
    config.write_text(yaml.safe_dump(settings))
    done = subprocess.run(
        [sys.executable, "-m", "trainables", "--config", str(config),
         "--metrics-out", str(metrics)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = metrics.read_text().splitlines() if metrics.exists() else []
    return done, json.loads(lines[-1]) if lines else {}


def per_layer(final: dict, name: str) -> list[float]:
    found = {int(k.rsplit("/", 1)[1]): v for k, v in final.items() if k.startswith(f"dyn/{name}/")}
    return [found[i] for i in sorted(found)]


@pytest.fixture
def modernbert_trial(folder, tiny_corpus) -> dict:
    return {
        "model": str(folder), "data": dict(tiny_corpus), "epochs": 1, "max_steps": 6,
        "eval_every": 3, "batch_size": 8, "lr": 1e-3, "max_length": 32, "threads": 1,
        "seed": 3,
    }  # fmt: skip


@pytest.mark.slow  # over ~7 s: the slow tier
def test_a_trial_cuts_re_draws_freezes_and_measures_through_the_command_line(
    modernbert_trial, tmp_path
):
    settings = modernbert_trial | {
        "depth": 3, "reinit_from": 2, "reinit_heads": [[1, 3]], "freeze": 1, "dynamics": "end",
    }  # fmt: skip
    done, final = run_trial(tmp_path, settings)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dev F1" in done.stdout and final["final"] == 1.0
    l2 = per_layer(final, "l2_query")
    assert len(l2) == 3 and len(per_layer(final, "cka")) == 4  # 3 blocks, 4 hidden states
    assert per_layer(final, "l2_sum")[0] == 0.0  # block 0: frozen, untouched
    assert per_layer(final, "attn_js")[0] == pytest.approx(0.0, abs=1e-9)
    assert 0.0 < l2[1] < l2[2]  # block 1 lost one head, block 2 was re-drawn whole
    assert all(math.isfinite(final[f"{s}_f1"]) for s in ("dev", "test"))


@pytest.mark.slow  # over ~7 s: the slow tier
def test_a_probe_trial_leaves_every_layer_where_it_was(modernbert_trial, tmp_path):
    done, final = run_trial(tmp_path, modernbert_trial | {"probe": True, "lr": 1e-2})
    assert done.returncode == 0, done.stderr[-3000:]
    assert set(per_layer(final, "l2_sum")) == {0.0}
    assert per_layer(final, "cka") == pytest.approx([1.0] * 5, abs=1e-6)


@pytest.mark.slow  # over ~7 s: the slow tier
def test_an_unsupported_family_is_refused_before_weights_load(modernbert_trial, tmp_path):
    folder = tmp_path / "gpt2"
    tiny_config("gpt2", layers=2).save_pretrained(folder)  # a config and no weights to load
    done, _ = run_trial(tmp_path, modernbert_trial | {"model": str(folder)})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "error: model type 'gpt2' is not supported for layer surgery; supported: bert, "
        "roberta, xlm-roberta, electra, deberta-v2, distilbert, modernbert"
    )
