"""The tagger saved as a Hugging Face folder (trainables/model/export.py) is the same function:
every family whose token classifier is one linear layer reloads through
AutoModelForTokenClassification with a cut depth and the tagger's exact logits; the others are
refused in one line."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForTokenClassification, AutoTokenizer

from tests.tiny import MODEL_TYPES, arch, sample_batch, tiny_model_folder
from trainables.data.labels import LabelMap
from trainables.errors import ModelError
from trainables.model.export import save_hf_folder
from trainables.model.tagger import build_tagger

LABELS = LabelMap(["O", "B-LOC", "I-LOC", "B-PER", "I-PER"])
ONE_LINEAR = [t for t in MODEL_TYPES if t != "modernbert"]


@pytest.mark.parametrize("model_type", ONE_LINEAR)
def test_a_cut_tagger_reloads_with_its_depth_labels_and_logits(model_type, tmp_path):
    folder = tiny_model_folder(tmp_path, model_type, layers=3)
    generator = torch.Generator().manual_seed(0)
    tagger, tokenizer = build_tagger(str(folder), len(LABELS.labels), generator=generator,
                                     architecture=arch(depth="full-1"))  # fmt: skip
    out = tmp_path / "export"
    save_hf_folder(tagger, tokenizer, LABELS, out)
    reloaded = AutoModelForTokenClassification.from_pretrained(out).eval()
    config = json.loads((out / "config.json").read_text())
    layers = config.get("num_hidden_layers", config.get("n_layers"))
    assert layers == 2
    assert reloaded.config.id2label == dict(enumerate(LABELS.labels))
    assert reloaded.config.label2id == LABELS.to_dict()
    assert AutoTokenizer.from_pretrained(out).get_vocab() == tokenizer.get_vocab()
    ids, mask = sample_batch(vocab_size=len(tokenizer))
    tagger.eval()
    with torch.no_grad():
        expected, _ = tagger(ids, mask)
        got = reloaded(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)


def test_a_family_with_a_deeper_token_head_is_refused(tmp_path):
    folder = tiny_model_folder(tmp_path, "modernbert", layers=2)
    tagger, tokenizer = build_tagger(str(folder), 5, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ModelError, match="cannot be saved as AutoModelForTokenClassification"):
        save_hf_folder(tagger, tokenizer, LABELS, tmp_path / "export")
    assert not (tmp_path / "export").exists()


def test_a_trial_that_cannot_keep_its_model_still_ends(tmp_path, tiny_corpus, caplog):
    """The final checkpoint of a ModernBERT trial holds no model folder, and the trial's
    final report is not lost to the refusal (trainables/tune_adapter.py)."""
    from trainables.settings.config import TrialConfig
    from trainables.training.train import Trial
    from trainables.tune_adapter import _save_model

    folder = tiny_model_folder(tmp_path, "modernbert", layers=2)
    trial = Trial(TrialConfig(model=str(folder), data=dict(tiny_corpus), max_length=32,
                              precision="fp32", dynamics="off"))  # fmt: skip
    _save_model(trial, tmp_path / "model")
    assert not (tmp_path / "model").exists()
    assert "the trial keeps no model" in caplog.text
