import math

import pytest
import torch
import yaml

from trainables import __main__ as command_line
from trainables.errors import ConfigError, TrainingDiverged
from trainables.settings.config import TrialConfig
from trainables.settings.precision import FORCE_ENV
from trainables.training.metrics import is_wall_clock
from trainables.training.optimization import clip_gradients
from trainables.training.train import Trial


def run_all(settings: dict) -> list[dict]:
    return [
        {k: v for k, v in m.items() if not is_wall_clock(k)}
        for m in Trial(TrialConfig.from_dict(settings)).run()
    ]


def same(a: dict, b: dict) -> bool:
    """Bit-identical, treating NaN as equal to NaN."""
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a
    )


def test_trial_learns_the_synthetic_entities(trial_settings):
    history = run_all(trial_settings | {"epochs": 6})
    final = history[-1]
    assert final["final"] == 1.0 and final["step"] == 72
    assert [m["step"] for m in history] == list(range(6, 73, 6))
    assert final["dev_f1"] > 0.8, final["dev_f1"]
    assert final["test_f1"] > 0.8
    assert final["train_loss"] < history[0]["train_loss"]
    assert {"test_f1_PER", "test_f1_LOC", "test_f1_ORG", "dev_f1_strict"} <= final.keys()
    assert 0 < final["curve_area"] <= final["dev_f1"] + 1e-9
    assert final["steps_to_95"] in [m["step"] for m in history]


@pytest.fixture(params=["fp32", "bf16"])
def precise_settings(request, trial_settings, monkeypatch) -> dict:
    """The tiny trial in each precision. bf16 is allowed here whatever the CPU (the forced
    answer): torch emulates bf16 where the CPU lacks it, slower but with the same rules."""
    monkeypatch.setenv(FORCE_ENV, "1")
    return trial_settings | {"precision": request.param}


def test_two_runs_with_one_seed_are_bit_identical(precise_settings):
    a, b = run_all(precise_settings), run_all(precise_settings)
    assert len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    first, second = (trained_weights(precise_settings) for _ in range(2))
    assert first.keys() == second.keys() and all(first[k].equal(second[k]) for k in first)


def trained_weights(settings: dict) -> dict[str, torch.Tensor]:
    """One trial built and run to its end (dropout draws from the global generator, which a
    trial seeds when it is built: two trials built before either runs would share it)."""
    trial = Trial(TrialConfig.from_dict(settings))
    list(trial.run())
    return trial.model.state_dict()


def test_bf16_computes_in_bf16_and_keeps_fp32_weights(trial_settings, monkeypatch):
    monkeypatch.setenv(FORCE_ENV, "1")
    trials = {p: Trial(TrialConfig.from_dict(trial_settings | {"precision": p}))
              for p in ("fp32", "bf16")}  # fmt: skip
    finals = {p: list(t.run())[-1] for p, t in trials.items()}
    assert finals["fp32"]["train_loss"] != finals["bf16"]["train_loss"]
    bf16 = trials["bf16"]
    assert {p.dtype for p in bf16.model.parameters()} == {torch.float32}
    moments = [v for s in bf16.optimizer.state.values() for v in s.values() if v.dim()]
    assert moments and {m.dtype for m in moments} == {torch.float32}
    assert finals["bf16"]["dev_f1"] > 0 and math.isfinite(finals["bf16"]["train_loss"])


def test_evaluation_batching_changes_neither_tags_nor_loss(trial_settings):
    """`eval_batch_tokens` is a speed setting: one sentence per batch or all in one give the
    same tags, and the same dev loss, which is a mean over labelled tokens, not over batches
    of unequal sizes."""
    trial = Trial(TrialConfig.from_dict(trial_settings | {"precision": "fp32"}))
    list(trial.run())
    dev = trial.eval_splits["dev"]
    widest = max(len(w) for w in dev.windows)
    scored = {}
    for tokens in (widest, widest * len(dev.windows)):  # one window per batch; all in one
        trial.cfg.eval_batch_tokens = tokens
        scored[tokens] = trial.predict(dev)
    (tags_one, loss_one), (tags_all, loss_all) = scored.values()
    assert tags_one == tags_all
    assert loss_one == pytest.approx(loss_all, rel=1e-5)


def test_a_different_seed_gives_a_different_run(trial_settings):
    a = run_all(trial_settings)[-1]
    b = run_all(trial_settings | {"seed": 4})[-1]
    assert a["train_loss"] != b["train_loss"]


def test_data_seed_moves_the_data_and_seed_the_weights(trial_settings):
    """Two random streams: `data_seed` draws the subset and order, `seed` the head weights."""
    settings = trial_settings | {"data_fraction": 0.5, "seed": 1}
    default = run_all(settings)
    assert all(same(x, y) for x, y in zip(default, run_all(settings | {"data_seed": 1}),
                                          strict=True))  # fmt: skip
    base = Trial(TrialConfig.from_dict(settings))
    other_data = Trial(TrialConfig.from_dict(settings | {"data_seed": 7}))
    other_init = Trial(TrialConfig.from_dict(settings | {"seed": 7, "data_seed": 1}))
    words = [[w.input_ids for w in t.train_split.windows] for t in (base, other_data, other_init)]
    assert words[0] != words[1] and words[0] == words[2]  # the subset follows data_seed only
    assert base._batches_of_epoch() == other_init._batches_of_epoch()
    head = [t.model.head.weight for t in (base, other_data,
                                                                           other_init)]  # fmt: skip
    assert head[0].equal(head[1]) and not head[0].equal(head[2])  # the head follows seed only


def test_resume_from_a_checkpoint_gives_the_uninterrupted_result(precise_settings, tmp_path):
    config = TrialConfig.from_dict(precise_settings)
    uninterrupted = run_all(precise_settings)

    first = Trial(config)
    stopped_at = next(iter(first.run()))["step"]  # stop after the first evaluation
    first.save(tmp_path / "ckpt")
    del first

    resumed = Trial(config)
    resumed.restore(tmp_path / "ckpt")
    assert resumed.step == stopped_at
    rest = [{k: v for k, v in m.items() if not is_wall_clock(k)} for m in resumed.run()]
    assert len(rest) == len(uninterrupted) - 1
    assert all(same(x, y) for x, y in zip(rest, uninterrupted[1:], strict=True))


def test_resume_mid_epoch_at_a_step_interval(precise_settings, tmp_path):
    settings = precise_settings | {"eval_every": 5}  # 12 batches per epoch: stops mid-epoch
    uninterrupted = run_all(settings)
    first = Trial(TrialConfig.from_dict(settings))
    runner = first.run()
    next(runner)
    next(runner)  # step 10, inside the first epoch
    first.save(tmp_path)
    resumed = Trial(TrialConfig.from_dict(settings))
    resumed.restore(tmp_path)
    final = {k: v for k, v in list(resumed.run())[-1].items() if not is_wall_clock(k)}
    assert same(final, uninterrupted[-1])


def test_a_checkpoint_resumes_only_in_its_own_precision(trial_settings, tmp_path, monkeypatch):
    monkeypatch.setenv(FORCE_ENV, "1")
    first = Trial(TrialConfig.from_dict(trial_settings | {"precision": "bf16"}))
    next(iter(first.run()))
    first.save(tmp_path)
    other = Trial(TrialConfig.from_dict(trial_settings | {"precision": "fp32"}))
    with pytest.raises(ConfigError, match="trained in bf16 and this trial runs in fp32"):
        other.restore(tmp_path)


@pytest.mark.parametrize("scale", [1e-3, 10.0, float("nan")])
def test_clipping_is_torchs_bit_for_bit(scale):
    """Within the bound (left as is), above it (scaled) and NaN (propagated, as torch does)."""
    generator = torch.Generator().manual_seed(0)
    ours = [torch.nn.Parameter(torch.zeros(n)) for n in (7, 300, 4096)]
    theirs = [torch.nn.Parameter(torch.zeros(n)) for n in (7, 300, 4096)]
    for a, b in zip(ours, theirs, strict=True):
        a.grad = torch.randn(a.shape, generator=generator) * scale
        b.grad = a.grad.clone()
    clip_gradients(ours, 1.0)
    torch.nn.utils.clip_grad_norm_(theirs, 1.0, foreach=True)
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a.grad, b.grad) or (a.grad.isnan().all() and b.grad.isnan().all())


def test_data_fraction_trains_on_a_nested_subset(trial_settings):
    small = Trial(TrialConfig.from_dict(trial_settings | {"data_fraction": 0.25}))
    assert len(small.train_split.windows) == 24
    assert small.total_steps == 2 * 3


def test_exploding_loss_ends_the_trial_with_a_clear_error(trial_settings):
    with pytest.raises(TrainingDiverged, match="loss became"):
        run_all(trial_settings | {"lr": 1e30, "max_grad_norm": 1e30, "warmup_ratio": 0.0})


def test_injected_failure_raises_at_that_step(trial_settings):
    trial = Trial(TrialConfig.from_dict(trial_settings | {"fail_at_step": 4}))
    with pytest.raises(RuntimeError, match="step 4"):
        list(trial.run())
    assert trial.step == 3


def test_extra_eval_sets_are_scored_at_the_end(trial_settings, tiny_corpus):
    settings = trial_settings | {
        "data": dict(tiny_corpus, extra={"other": tiny_corpus["test"]}),
        "max_steps": 6,
    }
    final = run_all(settings)[-1]
    assert final["other_f1"] == final["test_f1"]


def _dynamics(metrics: dict) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for key, value in metrics.items():
        if key.startswith("dyn/"):
            _, name, layer = key.split("/")
            out.setdefault(name, {})[int(layer)] = value
    return out


def test_layer_dynamics_are_measured_at_the_end_by_default(trial_settings):
    history = run_all(trial_settings)
    assert all(not _dynamics(m) for m in history[:-1])
    final = _dynamics(history[-1])
    blocks, states = range(3), range(4)  # the tiny model: 3 blocks, 4 hidden states
    for name in ("l2_query", "l2_key", "l2_value", "l2_attn_out", "l2_ffn_in", "l2_ffn_out",
                 "l2_sum", "attn_js"):  # fmt: skip
        assert sorted(final[name]) == list(blocks), name
    assert sorted(final["cka"]) == sorted(final["svcca"]) == list(states)
    assert all(v > 0 for v in final["l2_sum"].values())  # fine-tuning moved every block
    assert final["cka"][0] == pytest.approx(1.0, abs=1e-3) or final["l2_sum"][0] > 0
    assert all(0 <= v <= math.log(2) + 1e-9 for v in final["attn_js"].values())


def test_a_probe_leaves_every_layer_where_it_was(trial_settings):
    final = _dynamics(run_all(trial_settings | {"probe": True, "lr": 1e-2})[-1])
    assert set(final["l2_sum"].values()) == {0.0}
    assert all(v == pytest.approx(1.0, abs=1e-6) for v in final["cka"].values())
    assert all(v == pytest.approx(0.0, abs=1e-6) for v in final["attn_js"].values())


def test_dynamics_at_every_evaluation_or_never(trial_settings):
    every = list(Trial(TrialConfig.from_dict(trial_settings | {"dynamics": "each_eval"})).run())
    assert all(_dynamics(m) and m["dynamics_s"] > 0 for m in every)
    never = list(Trial(TrialConfig.from_dict(trial_settings | {"dynamics": "off"})).run())
    assert not any(_dynamics(m) or "dynamics_s" in m for m in never)
    assert every[-1]["dev_f1"] == never[-1]["dev_f1"]  # measuring does not change training


def test_truncated_encoder_reports_only_its_blocks(trial_settings):
    final = _dynamics(run_all(trial_settings | {"depth": 2})[-1])
    assert sorted(final["l2_sum"]) == [0, 1] and sorted(final["cka"]) == [0, 1, 2]


def test_bad_settings_are_one_line_config_errors(trial_settings):
    with pytest.raises(ConfigError, match="unknown trial setting.*learning_rate"):
        TrialConfig.from_dict(trial_settings | {"learning_rate": 1e-3})
    with pytest.raises(ConfigError, match="data_fraction=0"):
        TrialConfig.from_dict(trial_settings | {"data_fraction": 0})
    with pytest.raises(ConfigError, match="precision='bf32' is not allowed"):
        TrialConfig.from_dict(trial_settings | {"precision": "bf32"})


def test_command_line_trains_resumes_and_reports(trial_settings, tmp_path, capsys):
    config = tmp_path / "trial.yaml"
    config.write_text(yaml.safe_dump(trial_settings))
    ckpt = tmp_path / "ckpt"
    argv = ["--config", str(config), "--checkpoint-dir", str(ckpt)]
    assert command_line.main([*argv, "--set", "max_steps=6"]) == 0
    assert (ckpt / "model.safetensors").exists()
    assert command_line.main([*argv, "--resume", "--set", "max_steps=12"]) == 0
    out = capsys.readouterr().out
    assert "dev F1" in out and "test F1" in out and "steps 12" in out


def test_command_line_bad_input_is_one_line_and_exit_2(trial_settings, tmp_path, capsys):
    config = tmp_path / "trial.yaml"
    config.write_text(yaml.safe_dump(trial_settings | {"depth": 9}))
    assert command_line.main(["--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "depth" in err and "\n" not in err


@pytest.mark.slow
def test_embedded_minilm_trains_on_wnut16_for_a_few_steps():
    trial = Trial(
        TrialConfig.from_dict(
            {"data_fraction": 0.05, "max_steps": 3, "batch_size": 8, "depth": 5, "threads": 2}
        )
    )
    assert trial.model.encoder.config.num_hidden_layers == 5
    final = list(trial.run())[-1]
    assert final["final"] == 1.0 and final["step"] == 3
    assert math.isfinite(final["train_loss"]) and 0 <= final["test_f1"] <= 1
