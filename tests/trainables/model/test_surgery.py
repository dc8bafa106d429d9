import pytest
import torch
from torch import nn

from tests.tiny import HEADS, HIDDEN, MODEL_TYPES, sample_batch, tiny_config, tiny_encoder
from trainables.errors import ModelError
from trainables.model import surgery
from trainables.settings import layouts

STD = 0.02


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def block_prefix(model_type: str, index: int) -> str:
    return ".".join(layouts.layout_of(model_type).blocks) + f".{index}."


def hidden_states(model: nn.Module, **kwargs: object) -> object:
    input_ids, attention_mask = sample_batch()
    with torch.no_grad():
        return model(input_ids=input_ids, attention_mask=attention_mask, **kwargs)


# --- layout -------------------------------------------------------------------------------


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_blocks_and_projections_found_for_every_family(model_type):
    model = tiny_encoder(model_type, layers=3)
    assert surgery.num_blocks(model) == 3
    for block in surgery.encoder_blocks(model):
        *qkv, out = surgery.attention_parts(block, model_type)
        assert isinstance(out, nn.Linear)
        assert all(part.weight.shape == (HIDDEN, HIDDEN) for part in qkv)
        if layouts.layout_of(model_type).fused_qkv:  # one Linear, its thirds in order
            assert len({id(part.linear) for part in qkv}) == 1
            assert [part.rows.start for part in qkv] == [0, HIDDEN, 2 * HIDDEN]
        else:
            assert len({id(part.linear) for part in qkv} | {id(out)}) == 4


def test_unsupported_model_type_names_type_and_supported_ones():
    model = tiny_encoder("gpt2", layers=2)
    with pytest.raises(ModelError, match="'gpt2'.*bert, roberta") as info:
        surgery.truncate(model, 1)
    assert "\n" not in str(info.value)
    with pytest.raises(ModelError, match="gpt2"):
        surgery.check_model_type("gpt2")


# --- truncate -----------------------------------------------------------------------------


def block_outputs(model: nn.Module) -> tuple[torch.Tensor, ...]:
    """Embeddings, then each block's own output (transformers 5 would put the encoder's
    final-normed output in place of the top block's)."""
    model.config.tie_last_hidden_states = False
    return hidden_states(model, output_hidden_states=True).hidden_states


def after_blocks(model: nn.Module, state: torch.Tensor) -> torch.Tensor:
    """What the family applies to the top block's output (ModernBERT: its final norm)."""
    with torch.no_grad():
        for path in layouts.layout_of(surgery.encoder_family(model)).after_blocks:
            state = model.get_submodule(path)(state)
    return state


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_truncation_equals_full_hidden_state_at_every_depth(model_type):
    layers = 4
    full = tiny_encoder(model_type, layers)
    states = block_outputs(full)
    for depth in range(1, layers + 1):
        model = tiny_encoder(model_type, layers)
        surgery.truncate(model, depth)
        out = hidden_states(model).last_hidden_state
        assert surgery.num_blocks(model) == depth
        expected = after_blocks(full, states[depth])
        torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)


def test_truncation_exact_for_deberta_with_conv_and_position_projections():
    overrides = {"conv_kernel_size": 3, "share_att_key": False}
    full = hidden_states(tiny_encoder("deberta-v2", 3, **overrides), output_hidden_states=True)
    model = tiny_encoder("deberta-v2", 3, **overrides)
    surgery.truncate(model, 2)
    out = hidden_states(model).last_hidden_state
    torch.testing.assert_close(out, full.hidden_states[2], rtol=0, atol=1e-6)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_truncated_model_saves_and_reloads_with_new_depth(model_type, tmp_path):
    model = tiny_encoder(model_type, layers=4)
    surgery.truncate(model, 2)
    model.save_pretrained(tmp_path)
    reloaded = type(model).from_pretrained(tmp_path).eval()
    assert surgery.num_blocks(reloaded) == 2
    torch.testing.assert_close(
        hidden_states(reloaded).last_hidden_state, hidden_states(model).last_hidden_state
    )


@pytest.mark.parametrize("depth", [0, 5, -1, 2.0, True])
def test_truncate_rejects_depth_outside_range(depth):
    model = tiny_encoder("bert", layers=4)
    with pytest.raises(ModelError, match=r"outside 1\.\.4 for this 4-layer bert encoder"):
        surgery.truncate(model, depth)
    assert surgery.num_blocks(model) == 4


def test_depth_error_message_matches_spec():
    model = tiny_encoder("bert", layers=6)
    with pytest.raises(ModelError) as info:
        surgery.truncate(model, 7)
    assert str(info.value) == "depth 7 is outside 1..6 for this 6-layer bert encoder"


# --- reinit_from --------------------------------------------------------------------------


def reinit_changed(model_type: str, k: int, seed: int = 0, layers: int = 4):
    model = tiny_encoder(model_type, layers)
    before = snapshot(model)
    surgery.reinit_from(model, k, gen(seed))
    return model, before


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_reinit_from_leaves_lower_blocks_and_embeddings_bit_identical(model_type):
    k = 2
    model, before = reinit_changed(model_type, k)
    reinit_prefixes = tuple(block_prefix(model_type, i) for i in range(k, 4))
    for name, param in model.named_parameters():
        if name.startswith(reinit_prefixes):
            continue
        assert torch.equal(param, before[name]), name
    # Everything in a re-initialised block changed except parameters that were already 1/0.
    changed = [
        name
        for name, param in model.named_parameters()
        if name.startswith(reinit_prefixes) and not torch.equal(param, before[name])
    ]
    assert changed


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_reinit_from_draws_truncated_normal_and_resets_norms(model_type):
    model, _ = reinit_changed(model_type, 1)
    for block in list(surgery.encoder_blocks(model))[1:]:
        for module in block.modules():
            if isinstance(module, nn.Linear):
                assert module.weight.abs().max() <= 2 * STD
                if module.bias is not None:
                    assert torch.count_nonzero(module.bias) == 0
            elif surgery.is_layer_norm(module):
                assert torch.all(module.weight == 1)
                assert module.bias is None or torch.all(module.bias == 0)


def test_reinit_weight_statistics_on_a_large_layer():
    model = tiny_encoder("bert", 2, hidden_size=64, intermediate_size=256, num_attention_heads=4)
    surgery.reinit_from(model, 1, gen())
    weight = surgery.encoder_blocks(model)[1].intermediate.dense.weight  # 16384 draws
    expected = STD * surgery.TRUNC_STD_FACTOR  # the spread of a normal cut at +-2 std
    assert abs(weight.mean().item()) < 0.001
    assert weight.std().item() == pytest.approx(expected, rel=0.03)
    assert weight.abs().max().item() <= 2 * STD
    assert weight.abs().max().item() > 1.9 * STD  # the tails reach the cut


def test_reinit_std_argument_scales_draws():
    model = tiny_encoder("bert", 2, hidden_size=64, intermediate_size=256)
    surgery.reinit_from(model, 0, gen(), std=0.05)
    weight = surgery.encoder_blocks(model)[0].intermediate.dense.weight
    assert weight.std().item() == pytest.approx(0.05 * surgery.TRUNC_STD_FACTOR, rel=0.03)
    assert weight.abs().max().item() <= 0.1


def test_reinit_covers_deberta_relative_position_projections():
    model = tiny_encoder("deberta-v2", 2, share_att_key=False)
    before = snapshot(model)
    surgery.reinit_from(model, 1, gen())
    names = [n for n in before if "pos_key_proj.weight" in n or "pos_query_proj.weight" in n]
    assert names
    for name in names:
        param = model.get_parameter(name)
        assert torch.equal(param, before[name]) == name.startswith("encoder.layer.0.")
    # The shared relative-position embeddings sit outside the blocks and stay pretrained.
    assert torch.equal(model.encoder.rel_embeddings.weight, before["encoder.rel_embeddings.weight"])


def test_reinit_same_seed_identical_different_seed_different():
    first, _ = reinit_changed("bert", 1, seed=7)
    second, _ = reinit_changed("bert", 1, seed=7)
    third, _ = reinit_changed("bert", 1, seed=8)
    for (name, a), b in zip(first.named_parameters(), second.parameters(), strict=True):
        assert torch.equal(a, b), name
    assert not torch.equal(
        first.encoder.layer[1].attention.self.query.weight,
        third.encoder.layer[1].attention.self.query.weight,
    )


def test_reinit_does_not_touch_global_rng():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    reinit_changed("bert", 0)
    assert torch.equal(torch.rand(3), expected)


def test_reinit_from_all_blocks_k_equals_depth_changes_nothing():
    model, before = reinit_changed("bert", 4)
    for name, param in model.named_parameters():
        assert torch.equal(param, before[name]), name


@pytest.mark.parametrize("k", [-1, 5, True])
def test_reinit_from_rejects_k_outside_range(k):
    model = tiny_encoder("bert", layers=4)
    with pytest.raises(ModelError, match=r"outside 0\.\.4 for this 4-layer bert"):
        surgery.reinit_from(model, k, gen())


def test_reinit_after_truncate_uses_new_depth():
    model = tiny_encoder("roberta", layers=4)
    surgery.truncate(model, 2)
    surgery.reinit_from(model, 2, gen())  # k == new depth: allowed, no-op
    with pytest.raises(ModelError, match=r"outside 0\.\.2"):
        surgery.reinit_from(model, 3, gen())


# --- reinit_heads -------------------------------------------------------------------------


def expected_head_changes(model_type: str, layer: int, head: int) -> dict[str, torch.Tensor]:
    """Boolean masks of the entries that a head re-draw may change, by parameter name, written
    from the families' layouts rather than from surgery: Q, K and V are their own Linears, or
    the thirds of one fused QKV Linear (ModernBERT), each head d = HIDDEN / HEADS rows."""
    d = HIDDEN // HEADS
    layout = layouts.layout_of(model_type)
    prefix = block_prefix(model_type, layer)
    size = 3 * HIDDEN if layout.fused_qkv else HIDDEN
    rows = {path: torch.zeros(size, dtype=torch.bool) for path in layout.projections[:3]}
    for part, path in enumerate(layout.projections[:3]):
        offset = part * HIDDEN if layout.fused_qkv else 0
        rows[path][offset + head * d : offset + (head + 1) * d] = True
    masks = {prefix + path + ".bias": mask for path, mask in rows.items()}
    masks |= {
        prefix + path + ".weight": m[:, None].expand(size, HIDDEN) for path, m in rows.items()
    }
    columns = torch.zeros(HIDDEN, dtype=torch.bool)
    columns[head * d : (head + 1) * d] = True
    masks[prefix + layout.projections[3] + ".weight"] = columns[None, :].expand(HIDDEN, HIDDEN)
    return masks


@pytest.mark.parametrize(
    ("model_type", "overrides"),
    [*((t, {}) for t in MODEL_TYPES), ("modernbert", {"attention_bias": True})],
)
def test_reinit_heads_changes_exactly_the_head_slices(model_type, overrides):
    layer, head = 2, 1
    model = tiny_encoder(model_type, layers=3, **overrides)
    before = snapshot(model)
    surgery.reinit_heads(model, [(layer, head)], gen())
    masks = expected_head_changes(model_type, layer, head)
    for name, param in model.named_parameters():
        mask = masks.get(name)
        if mask is None:
            assert torch.equal(param, before[name]), name
            continue
        assert torch.equal(param[~mask], before[name][~mask]), name
        if name.endswith(".bias"):
            assert torch.count_nonzero(param[mask]) == 0, name
        else:
            assert torch.all(param[mask] != before[name][mask]), name
            assert param[mask].abs().max() <= 2 * STD


def test_reinit_heads_records_no_autograd_history():
    model = tiny_encoder("bert", 2)
    surgery.reinit_heads(model, [(0, 0), (1, 3)], gen())
    for param in model.parameters():
        assert param.is_leaf and param.grad_fn is None


def test_reinit_heads_deterministic_per_seed():
    a, b, c = tiny_encoder("electra", 2), tiny_encoder("electra", 2), tiny_encoder("electra", 2)
    surgery.reinit_heads(a, [(1, 0), (0, 2)], gen(3))
    surgery.reinit_heads(b, [(1, 0), (0, 2)], gen(3))
    surgery.reinit_heads(c, [(1, 0), (0, 2)], gen(4))
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb), name
    assert not torch.equal(
        a.encoder.layer[1].attention.self.query.weight,
        c.encoder.layer[1].attention.self.query.weight,
    )


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ((4, 0), r"layer 4 is outside 0\.\.3"),
        ((-1, 0), r"layer -1 is outside 0\.\.3"),
        ((0, 4), r"head 4 is outside 0\.\.3"),
        ((0, -1), r"head -1 is outside 0\.\.3"),
    ],
)
def test_reinit_heads_rejects_out_of_range_and_changes_nothing(pair, message):
    model = tiny_encoder("distilbert", layers=4)
    before = snapshot(model)
    with pytest.raises(ModelError, match=message):
        surgery.reinit_heads(model, [(0, 0), pair], gen())
    for name, param in model.named_parameters():
        assert torch.equal(param, before[name]), name


def test_tiny_config_shapes_match_constants():
    # The head-slice masks above assume these sizes; fail loudly if tiny.py changes them.
    config = tiny_config("bert")
    assert (config.hidden_size, config.num_attention_heads) == (HIDDEN, HEADS)


@pytest.mark.parametrize(("depth", "kept"), [("full", 4), ("full-1", 3), ("full - 3", 1)])
def test_depth_relative_to_the_model_is_resolved_at_build_time(depth, kept):
    """A cluster study names `full-1` without knowing the hub model's layer count."""
    model = tiny_encoder("bert", layers=4)
    surgery.truncate(model, depth)
    assert surgery.num_blocks(model) == kept


@pytest.mark.parametrize("depth", ["full-4", "full+1", "half"])
def test_relative_depth_outside_the_model_is_an_error(depth):
    with pytest.raises(ModelError, match="depth"):
        surgery.truncate(tiny_encoder("bert", layers=4), depth)
