"""Intermediate stages of a trial on the tiny model: a staged trial is its stages run by hand,
resumes inside any stage to the uninterrupted end, gives a stage with other labels a fresh
head, and keeps the target's data, head and dropout draws those of the trial without stages."""

from __future__ import annotations

import math

import pytest
import torch
import yaml

from tests.conftest import other_domain, synthetic_sentences, write_conll
from trainables import __main__ as command_line
from trainables.data.labels import LabelMap
from trainables.data.sources import load_checked_splits
from trainables.errors import ConfigError
from trainables.settings.config import STAGE_RUNS, TrialConfig
from trainables.settings.stage_config import STAGE_KEY, stage_label
from trainables.training.metrics import is_wall_clock, learning_curve_area
from trainables.training.stages import StagedTrial, stage_config, target_config
from trainables.training.train import Trial
from trainables.training.trials import new_trial


@pytest.fixture(scope="module")
def other_corpus(tmp_path_factory) -> dict[str, str]:
    """The synthetic sentences with their types named as another corpus names them
    (person, place, company): a label set of its own for an intermediate stage."""
    folder = tmp_path_factory.mktemp("other")
    sizes = {"train": (96, 11), "dev": (24, 12), "test": (24, 13)}
    return {
        split: str(write_conll(folder / f"{split}.txt", other_domain(synthetic_sentences(n, s))))
        for split, (n, s) in sizes.items()
    }


@pytest.fixture
def staged(trial_settings, other_corpus) -> dict:
    """A target after two intermediate stages: other types, then untyped spans (12 steps each)."""
    stages = [
        {"name": "other", "data": other_corpus, "epochs": 1, "lr": 2e-3},
        {"name": "spans", "data": {**other_corpus, "untyped": True}, "epochs": 1},
    ]
    return trial_settings | {"intermediate": stages, "reinit_from": 2}


def plain(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if not is_wall_clock(k)}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a
    )


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    left, right = a.state_dict(), b.state_dict()
    return left.keys() == right.keys() and all(left[k].equal(right[k]) for k in left)


def run_all(trial) -> list[dict]:
    return [plain(m) for m in trial.run()]


@pytest.mark.slow  # over ~7 s: the slow tier
def test_a_staged_trial_is_its_stages_run_by_hand(staged):
    config = TrialConfig.from_dict(staged)
    trial = new_trial(config)
    assert isinstance(trial, StagedTrial)
    final = run_all(trial)[-1]

    # by hand: surgery as a trial without stages draws it, then each stage a trial of its own
    # started from the encoder the one before ended with, then the target
    encoder = Trial(target_config(config)).model.encoder.state_dict()
    stages = []
    for index in range(2):
        stage = Trial(stage_config(config, index))
        stage.model.encoder.load_state_dict(encoder)
        run_all(stage)
        encoder = stage.model.encoder.state_dict()
        stages.append(stage)
    target = Trial(target_config(config))
    target.model.encoder.load_state_dict(encoder)
    by_hand = run_all(target)[-1]

    assert same_weights(trial.model, target.model)
    whole_trial = ("step", "steps_run", "tokens_seen")  # counted over every stage
    assert {k: v for k, v in final.items() if k in by_hand and k not in whole_trial} == {
        k: v for k, v in by_hand.items() if k not in whole_trial
    }
    assert final["steps_run"] == sum(t.step for t in (*stages, target))
    assert final["tokens_seen"] == sum(t.tokens_seen for t in (*stages, target))


def test_each_stage_reports_under_its_prefix_and_the_target_alone_makes_the_curve(staged):
    history = run_all(new_trial(TrialConfig.from_dict(staged)))
    steps = [m["step"] for m in history]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)  # MLflow's steps go on
    stage0 = [m for m in history if m.get(STAGE_KEY) == 0]
    stage1 = [m for m in history if m.get(STAGE_KEY) == 1]
    target = [m for m in history if STAGE_KEY not in m]
    assert [m["step"] for m in stage0] == [6, 12] and [m["stage0_step"] for m in stage0] == [6, 12]
    assert [m["step"] for m in stage1] == [18, 24] and [m["stage1_step"] for m in stage1] == [6, 12]
    assert [m["step"] for m in target] == [30, 36, 42, 48]
    assert all("dev_f1" not in m and "final" not in m for m in stage0 + stage1)
    assert stage0[-1]["stage0_final"] == 1.0 and "stage0_test_f1" in stage0[-1]
    final = target[-1]
    assert final["intermediate_steps"] == 24
    assert final["curve_area"] == learning_curve_area([m["dev_f1"] for m in target])
    assert final["steps_to_95"] in (6, 12, 18, 24)  # counted in the target's own steps
    for index in (0, 1):  # each stage's dynamics, measured against the pretrained encoder
        moved = [final[f"dyn/stage{index}_l2_sum/{layer}"] for layer in range(3)]
        assert all(v > 0 for v in moved)
    assert {"dyn/l2_sum/0", "dyn/cka/3"} <= final.keys()
    # the target moved the encoder further from the pretrained one than the first stage did
    assert final["dyn/l2_sum/0"] != final["dyn/stage0_l2_sum/0"]


def test_a_stage_with_other_labels_gets_a_fresh_head_and_the_target_keeps_its_own_map(
    staged, tiny_corpus
):
    trial = new_trial(TrialConfig.from_dict(staged))
    history = run_all(trial)
    assert trial.label_map == LabelMap.from_sentences(load_checked_splits(tiny_corpus)[0].train)
    assert trial.trials[0].label_map.entity_types() == {"person", "place", "company"}
    assert trial.trials[1].label_map.labels == ("O", "B-ENT", "I-ENT")
    assert trial.model.head.out_features == 7 and trial.trials[1].model.head.out_features == 3
    finals = {k: v for m in history for k, v in m.items() if k.endswith("head_kept")}
    assert finals == {"stage0_head_kept": 0.0, "stage1_head_kept": 0.0, "head_kept": 0.0}


def test_a_stage_with_the_targets_labels_hands_its_head_on(trial_settings, tiny_corpus):
    stage = {"name": "warmup", "data": tiny_corpus, "epochs": 1}
    trial = new_trial(TrialConfig.from_dict(trial_settings | {"intermediate": [stage]}))
    runner = trial.run()
    while STAGE_KEY in next(runner):  # through the stage, to the target's first evaluation
        pass
    assert trial.kept == [False, True]
    history = [*runner]
    assert history[-1]["head_kept"] == 1.0


def test_the_target_draws_what_the_trial_without_stages_draws(staged):
    """Pairing by seed: an arm with stages and one without see the same target data subset and
    order, start from the same head, and start the same dropout stream."""
    settings = staged | {"data_fraction": 0.5, "data_seed": 9}
    trial = new_trial(TrialConfig.from_dict(settings))
    alone = Trial(TrialConfig.from_dict(settings | {"intermediate": []}))
    alone_rng = torch.get_rng_state()
    target = trial.target
    assert [w.input_ids for w in target.train_split.windows] == [
        w.input_ids for w in alone.train_split.windows
    ]
    assert target._batches_of_epoch() == alone._batches_of_epoch()
    assert target.model.head.weight.equal(alone.model.head.weight)
    assert trial._start_rng[-1][0].equal(alone_rng)
    for index in (0, 1):  # the stages draw from seeds of their own
        assert trial.trials[index].cfg.seed not in (settings["seed"], 9)


@pytest.mark.slow  # over ~7 s: the slow tier
@pytest.mark.parametrize("stop_in", ["first stage", "end of the first stage", "target"])
def test_resume_inside_any_stage_ends_where_the_uninterrupted_trial_ends(staged, tmp_path, stop_in):
    config = TrialConfig.from_dict(staged)
    uninterrupted = new_trial(config)
    expected = run_all(uninterrupted)
    stops = {
        "first stage": lambda m: m.get(STAGE_KEY) == 0,
        "end of the first stage": lambda m: m.get("stage0_final") == 1.0,
        "target": lambda m: STAGE_KEY not in m,
    }
    first = new_trial(config)
    for metrics in first.run():
        if stops[stop_in](metrics):
            break
    first.save(tmp_path)
    resumed = new_trial(config)
    resumed.restore(tmp_path)
    assert resumed.step == metrics["step"]
    rest = run_all(resumed)
    assert same(rest[-1], expected[-1])
    assert same_weights(resumed.model, uninterrupted.model)


def test_a_checkpoint_without_stages_restores_as_the_targets(trial_settings, tmp_path):
    """A trial without stages saves no stage: its checkpoints load as before."""
    trial = new_trial(TrialConfig.from_dict(trial_settings))
    assert isinstance(trial, Trial)
    next(iter(trial.run()))
    trial.save(tmp_path)
    assert not (tmp_path / "stages.json").exists()


def test_untyped_data_keeps_the_spans_and_drops_the_types(tiny_corpus):
    splits, labels = load_checked_splits({**tiny_corpus, "untyped": True})
    typed, _ = load_checked_splits(tiny_corpus)
    assert labels.labels == ("O", "B-ENT", "I-ENT")
    for kept, original in zip(splits.dev, typed.dev, strict=True):
        assert [t[:2] for t in kept.tags] == [t[:2] for t in original.tags]


def test_arm_names_of_stage_lists():
    assert stage_label([]) == "none"
    assert stage_label([{"name": "conll"}, {"data": {}}]) == "conll+stage1"


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        ({"name": "x"}, "intermediate[0]: data is missing: each stage trains on its own data"),
        ({"data": {"embedded": "wnut16"}, "probe": True},
         "intermediate[0].probe: not allowed in a stage: probe applies to the target stage"),
        ({"data": {"embedded": "wnut16"}, "epochz": 2},
         "intermediate[0].epochz: unknown stage key 'epochz' (did you mean 'epochs'?)"),
        ({"data": {"embedded": "wnut16"}, "depth": 2},
         "intermediate[0].depth: not allowed in a stage: depth applies once, before the first"),
        ({"data": {"embedded": "wnut16"}, "lr": 0}, "intermediate[0].lr: 0 is not allowed"),
        ({"data": {"train": "a.txt"}}, "intermediate[0].data: missing split(s) ['dev', 'test']"),
        ({"data": {"embedded": "wnut16"}, "budget": {"steps": 0}},
         "intermediate[0].budget.steps: 0 is not allowed: an integer >= 1"),
        ({"data": {"embedded": "wnut16"}, "budget": {"until_plateau": {"patience": 1}}},
         "intermediate[0].budget.until_plateau.max_epochs: max_epochs is missing"),
    ],
)  # fmt: skip
def test_a_bad_stage_is_one_config_error(stage, message):
    with pytest.raises(ConfigError) as raised:
        TrialConfig.from_dict({"intermediate": [stage]})
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_the_command_line_runs_resumes_and_refuses_stages(
    trial_settings, other_corpus, tmp_path, capsys
):
    config = tmp_path / "trial.yaml"
    stage = {"name": "other", "data": other_corpus, "epochs": 1}
    config.write_text(yaml.safe_dump(trial_settings | {"intermediate": [stage]}))
    ckpt = tmp_path / "ckpt"
    argv = ["--config", str(config), "--checkpoint-dir", str(ckpt)]
    assert command_line.main([*argv, "--set", "max_steps=6"]) == 0  # 6 steps in each stage
    assert (ckpt / "stages.json").exists() and "steps 12" in capsys.readouterr().out
    assert command_line.main([*argv, "--resume", "--set", "max_steps=12"]) == 0
    # the target went on from its checkpoint; the stage ran 6 steps (its checkpoint says so)
    assert "steps 18" in capsys.readouterr().out

    bad = tmp_path / "bad.txt"
    bad.write_text("john\tB-PER\nsmith\tE-PER\n")
    broken = {"name": "bad", "data": {**other_corpus, "train": str(bad)}}
    config.write_text(yaml.safe_dump(trial_settings | {"intermediate": [broken]}))
    assert command_line.main(["--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: intermediate stage 0 (bad): {bad}:2: tag 'E-PER' is not in the "
                   "BIO/IOB2 scheme (expected O, B-TYPE or I-TYPE)")  # fmt: skip


def test_stage_budgets_are_their_own_and_the_trial_counts_every_step(staged, tmp_path):
    """A stage stopped by until_plateau and one with a step budget: the target's steps and
    the trial's compute count what each stage ran, also after a resume in the target."""
    plateau = {"until_plateau": {"patience": 1, "min_delta": 0.5, "max_epochs": 3}}
    staged["intermediate"][0]["budget"] = plateau  # judged from its second evaluation on
    staged["intermediate"][1]["budget"] = {"steps": 5}
    staged["budget"] = {"steps": 8}  # the target's alone
    config = TrialConfig.from_dict(staged)
    trial = new_trial(config)
    history = run_all(trial)
    final = history[-1]
    first, second = trial.trials[0], trial.trials[1]
    # eval_every 6 on 12 batches an epoch: the smoothing window is 2 evaluations, so the first
    # smoothed value comes at the second evaluation and patience 1 stops it at the third
    assert first.batches_per_epoch == 12 and first.watch.window == 2
    assert first.step == 3 * 6 < first.total_steps
    assert second.step == 5 and trial.target.step == 8
    assert final["intermediate_steps"] == 23 and final["steps_run"] == final["step"] == 31
    assert final["tokens_seen"] == sum(t.tokens_seen for t in trial.trials)
    spent = {k: v for m in history for k, v in m.items() if k.endswith("steps_run")}
    assert spent["stage0_steps_run"] == 18 and spent["stage1_steps_run"] == 5
    again = new_trial(config)
    for metrics in again.run():
        if STAGE_KEY not in metrics:  # the target's first evaluation
            break
    again.save(tmp_path)
    resumed = new_trial(config)
    resumed.restore(tmp_path)
    assert resumed.step == metrics["step"]
    assert same(run_all(resumed)[-1], final)


def test_a_stage_trains_with_its_own_settings_and_the_values_every_stage_takes():
    """What a stage is (the module's docstring), checked against `stage_config`: its own lr,
    the trial's epochs where it sets none, its own budget (none where it has none), the
    trial's depth, and no re-initialisation, freeze, probe, data share, fingerprint or fault;
    the `stage_runs` marks on the fields say the same."""
    stage = {"name": "s", "data": {"embedded": "wnut16"}, "lr": 3e-4}
    config = TrialConfig(depth=2, reinit_from=1, reinit_heads=[[0, 0]], freeze=1, probe=True,
                         data_fraction=0.5, fingerprint=True, fail_at_step=3, lr=1e-4, epochs=2,
                         budget={"steps": 5}, intermediate=[stage])  # fmt: skip
    staged = stage_config(config, 0)
    assert (staged.lr, staged.epochs, staged.budget, staged.depth) == (3e-4, 2, None, 2)
    assert (staged.reinit_from, staged.reinit_heads, staged.freeze, staged.probe) == (
        None, [], None, False,
    )  # fmt: skip
    assert (staged.data_fraction, staged.fingerprint, staged.fail_at_step) == (1.0, False, None)
    assert staged.intermediate == [] and staged.data == stage["data"]
    assert staged.seed != config.seed
    for name, value in STAGE_RUNS.items():
        assert getattr(staged, name) == value, name
