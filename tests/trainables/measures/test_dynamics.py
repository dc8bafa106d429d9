import copy
import math

import numpy as np
import pytest
import torch

from tests.tiny import MODEL_TYPES, tiny_encoder
from trainables.data.encoding import EncodedSplit, Window
from trainables.errors import ModelError
from trainables.measures import dynamics
from trainables.model import surgery

LAYERS = 4
# A "pretrained" encoder whose blocks do real work: with the default 0.02 init every block is
# close to the identity (the residual dominates) and a re-initialised one would look unchanged.
PRETRAINED_INIT = 0.2
PAD_ID = 0
LN2 = math.log(2)
# ModernBERT's pre-norm blocks add to a residual stream that carries the states below forward,
# so a re-drawn block (near the identity at std 0.02) moves the states less than a post-norm
# block does: its "pretrained" blocks get larger weights, and the states a looser bound.
PRETRAINED_INITS = {"modernbert": 0.5}
MOVED_CKA_BELOW = {"modernbert": 0.9}


def pretrained(model_type: str = "bert", layers: int = LAYERS) -> torch.nn.Module:
    init = PRETRAINED_INITS.get(model_type, PRETRAINED_INIT)
    return tiny_encoder(model_type, layers, initializer_range=init)


def reinitialised(reference: torch.nn.Module, k: int) -> torch.nn.Module:
    model = copy.deepcopy(reference)
    surgery.reinit_from(model, k, torch.Generator().manual_seed(1))
    return model


def batches(n: int = 3, size: int = 6, width: int = 10, seed: int = 0) -> list[dict]:
    """Random sentences of random lengths, right-padded with PAD_ID."""
    generator = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        lengths = torch.randint(3, width + 1, (size,), generator=generator)
        mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
        ids = torch.randint(5, 100, (size, width), generator=generator) * mask
        out.append({"input_ids": ids, "attention_mask": mask})
    return out


def random_distributions(shape: tuple[int, ...], sharpness: float, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.softmax(sharpness * torch.randn(shape, generator=generator), dim=-1)


# --- whole encoders -----------------------------------------------------------------------


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_identical_encoders_have_not_moved(model_type):
    reference = pretrained(model_type)
    result = dynamics.layer_dynamics(copy.deepcopy(reference), reference, batches())
    parts = [f"l2_{p}" for p in (*dynamics.WEIGHT_PARTS, "sum")]
    assert set(result) == {*parts, "attn_js", "cka", "svcca"}
    for key in [*parts, "attn_js"]:
        assert len(result[key]) == LAYERS
    for key in parts:
        assert result[key] == [0.0] * LAYERS
    assert result["attn_js"] == pytest.approx([0.0] * LAYERS, abs=1e-9)
    assert result["cka"] == pytest.approx([1.0] * (LAYERS + 1), abs=1e-9)
    assert result["svcca"] == pytest.approx([0.0] * (LAYERS + 1), abs=1e-9)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_reinitialised_blocks_move_far_and_blocks_below_do_not(model_type):
    k = 2
    reference = pretrained(model_type)
    result = dynamics.layer_dynamics(reinitialised(reference, k), reference, batches())
    for part in (*dynamics.WEIGHT_PARTS, "sum"):
        assert result[f"l2_{part}"][:k] == [0.0] * k
        assert all(d > 1.0 for d in result[f"l2_{part}"][k:])
    assert result["attn_js"][:k] == pytest.approx([0.0] * k, abs=1e-9)
    assert all(0.0 < js <= LN2 for js in result["attn_js"][k:])
    # hidden state i is block i-1's output: states 0..k are untouched by blocks k and above
    assert result["cka"][: k + 1] == pytest.approx([1.0] * (k + 1), abs=1e-9)
    assert all(c < MOVED_CKA_BELOW.get(model_type, 0.8) for c in result["cka"][k + 1 :])
    assert result["svcca"][: k + 1] == pytest.approx([0.0] * (k + 1), abs=1e-9)
    assert all(d > 0.1 for d in result["svcca"][k + 1 :])


@pytest.mark.parametrize("model_type", ["bert", "deberta-v2", "modernbert"])
def test_padding_changes_nothing(model_type):
    reference = pretrained(model_type)
    encoder = reinitialised(reference, 1)
    plain = batches()
    noisy = []
    for batch in plain:
        mask = batch["attention_mask"]
        junk = torch.randint(5, 100, mask.shape, generator=torch.Generator().manual_seed(9))
        ids = torch.where(mask.bool(), batch["input_ids"], junk)
        # three more padded columns, filled with junk tokens too
        noisy.append(
            {
                "input_ids": torch.cat([ids, junk[:, :3]], dim=1),
                "attention_mask": torch.cat([mask, torch.zeros_like(mask[:, :3])], dim=1),
            }
        )
    expected = dynamics.layer_dynamics(encoder, reference, plain)
    result = dynamics.layer_dynamics(encoder, reference, noisy)
    for key, values in expected.items():
        assert result[key] == pytest.approx(values, rel=1e-4, abs=1e-6), key


@pytest.mark.parametrize("model_type", ["bert", "distilbert", "deberta-v2", "modernbert"])
def test_truncated_encoder_compares_only_its_blocks(model_type):
    reference = pretrained(model_type)
    encoder = copy.deepcopy(reference)
    surgery.truncate(encoder, 2)
    result = dynamics.layer_dynamics(encoder, reference, batches())
    assert result["l2_sum"] == [0.0, 0.0]
    assert result["attn_js"] == pytest.approx([0.0, 0.0], abs=1e-9)
    assert result["cka"] == pytest.approx([1.0] * 3, abs=1e-9)
    assert result["svcca"] == pytest.approx([0.0] * 3, abs=1e-9)


def test_mismatched_pairs_are_rejected():
    reference = pretrained("bert")
    shallow = copy.deepcopy(reference)
    surgery.truncate(shallow, 2)
    with pytest.raises(ModelError, match="4 blocks but its reference only 2"):
        dynamics.weight_distances(reference, shallow)
    with pytest.raises(ModelError, match="distilbert.*bert"):
        dynamics.layer_dynamics(pretrained("distilbert"), reference, batches())
    gpt2 = tiny_encoder("gpt2", layers=2)
    with pytest.raises(ModelError, match="gpt2"):
        dynamics.weight_distances(gpt2, gpt2)
    with pytest.raises(ValueError, match="at least one batch"):
        dynamics.layer_dynamics(reference, copy.deepcopy(reference), [])


def test_modes_and_attention_implementation_are_restored():
    reference = pretrained("bert")
    encoder = reinitialised(reference, 2)
    encoder.train()
    encoder.embeddings.eval()  # a mixed state, as a partly frozen tagger may have
    implementation = encoder.config._attn_implementation
    assert implementation != "eager"  # otherwise this test checks nothing
    first = dynamics.layer_dynamics(encoder, reference, batches())
    assert encoder.training and not encoder.embeddings.training
    assert encoder.encoder.layer[0].training
    assert not reference.training
    assert encoder.config._attn_implementation == implementation
    assert reference.config._attn_implementation == implementation
    # each block's own output was measured; the model's outputs are as they were
    assert not hasattr(encoder.config, "tie_last_hidden_states")
    # dropout was off while measuring, so a second call agrees exactly
    assert dynamics.layer_dynamics(encoder, reference, batches()) == first


def test_partial_functions_agree_with_the_entry_point():
    reference = pretrained("bert")
    encoder = reinitialised(reference, 3)
    sample = batches()
    result = dynamics.layer_dynamics(encoder, reference, sample)
    assert dynamics.attention_js(encoder, reference, sample) == result["attn_js"]
    similarity = dynamics.hidden_similarity(encoder, reference, sample)
    assert similarity == {"cka": result["cka"], "svcca": result["svcca"]}
    distances = dynamics.weight_distances(encoder, reference)
    assert distances == {k: v for k, v in result.items() if k.startswith("l2_")}
    assert distances["l2_sum"][3] == pytest.approx(
        sum(distances[f"l2_{p}"][3] for p in dynamics.WEIGHT_PARTS)
    )


# --- similarity and divergence functions --------------------------------------------------


def test_cka_is_invariant_to_rotation_and_isotropic_scaling():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 16))
    y = x @ rng.normal(size=(16, 12)) + 0.5 * rng.normal(size=(300, 12))
    rotation, _ = np.linalg.qr(rng.normal(size=(16, 16)))
    base = dynamics.linear_cka(x, y)
    assert 0.2 < base < 0.99
    assert dynamics.linear_cka(x @ rotation, y) == pytest.approx(base, abs=1e-12)
    assert dynamics.linear_cka(7.3 * x, y) == pytest.approx(base, abs=1e-12)
    assert dynamics.linear_cka(x, y * 1e-3) == pytest.approx(base, abs=1e-12)
    assert dynamics.linear_cka(x, 2.0 * x @ rotation) == pytest.approx(1.0, abs=1e-12)
    assert dynamics.linear_cka(y, x) == pytest.approx(base, abs=1e-12)
    assert dynamics.linear_cka(x, rng.normal(size=(300, 16))) < 0.2


def test_svcca_is_invariant_to_rotation_and_scaling():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 10))
    y = x[:, :6] @ rng.normal(size=(6, 8)) + 2.0 * rng.normal(size=(400, 8))
    rotation, _ = np.linalg.qr(rng.normal(size=(10, 10)))
    base = dynamics.svcca_distance(x, y)
    assert 0.05 < base < 0.9
    assert dynamics.svcca_distance(3.0 * x @ rotation, y) == pytest.approx(base, abs=1e-9)
    assert dynamics.svcca_distance(x, x @ rotation) == pytest.approx(0.0, abs=1e-9)


def test_similarities_of_degenerate_inputs():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(50, 5))
    with_constant = np.hstack([x, np.full((50, 1), 3.0)])
    # a constant feature carries no information: it must not turn a defined value into NaN
    assert dynamics.linear_cka(with_constant, x) == pytest.approx(1.0, abs=1e-12)
    assert dynamics.svcca_distance(with_constant, x) == pytest.approx(0.0, abs=1e-9)
    constant = np.ones((50, 4))
    with np.errstate(all="raise"):  # no silent 0/0 on the way
        assert math.isnan(dynamics.linear_cka(constant, x))
        assert math.isnan(dynamics.svcca_distance(x, constant))
        assert math.isnan(dynamics.linear_cka(x[:1], x[:1]))


@pytest.mark.parametrize("sharpness", [0.1, 1.0, 10.0, 200.0])
def test_js_is_symmetric_and_bounded(sharpness):
    p = random_distributions((64, 12), sharpness, seed=0)
    q = random_distributions((64, 12), sharpness, seed=1)
    forward, backward = dynamics.js_divergence(p, q), dynamics.js_divergence(q, p)
    assert forward.shape == (64,)
    assert torch.equal(forward, backward)
    assert bool((forward >= 0).all()) and bool((forward <= LN2).all())
    assert torch.equal(dynamics.js_divergence(p, p), torch.zeros(64, dtype=forward.dtype))


def test_js_of_disjoint_distributions_is_ln2():
    p = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]])
    q = torch.tensor([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.25, 0.75]])
    assert dynamics.js_divergence(p, q).tolist() == pytest.approx([LN2, LN2], abs=1e-12)
    nearly = random_distributions((64, 12), 200.0, seed=0)
    shifted = nearly.roll(1, dims=-1)
    assert dynamics.js_divergence(nearly, shifted).mean() > 0.6


# --- the dev sample -----------------------------------------------------------------------


def window(index: int, length: int) -> Window:
    ids = tuple(range(5, 5 + length))
    return Window(ids, (-100,) * length, (1,), sentence=index, word_start=0)


def test_dev_sample_takes_the_first_windows_in_order():
    split = EncodedSplit([window(i, 3 + i % 4) for i in range(10)], [], 0, 0)
    sample = dynamics.dev_sample(split, pad_id=PAD_ID, n=7, batch_size=3)
    assert [b["input_ids"].shape[0] for b in sample] == [3, 3, 1]
    assert all(set(b) == {"input_ids", "attention_mask"} for b in sample)
    lengths = [int(n) for b in sample for n in b["attention_mask"].sum(1)]
    assert lengths == [len(w) for w in split.windows[:7]]
    assert sample[0]["input_ids"][0, 3:].tolist() == [PAD_ID] * 2  # padded to the batch width
    assert len(dynamics.dev_sample(split, pad_id=PAD_ID, n=100, batch_size=4)) == 3
    with pytest.raises(ValueError):
        dynamics.dev_sample(split, pad_id=PAD_ID, n=0)


def test_dev_sample_feeds_layer_dynamics():
    split = EncodedSplit([window(i, 4 + i % 5) for i in range(12)], [], 0, 0)
    reference = pretrained("distilbert")
    result = dynamics.layer_dynamics(
        reinitialised(reference, 3), reference, dynamics.dev_sample(split, PAD_ID, n=10)
    )
    assert result["cka"][:4] == pytest.approx([1.0] * 4, abs=1e-9)
    assert result["cka"][4] < 1.0
