"""The synthetic trainable alone (trainables/settings/surface.py,
trainables/training/synthetic.py), no Ray: it evaluates when the tagger would, a resumed trial
reports what an uninterrupted one does, it fails and diverges when told to, its noise is the
documented size, and its stand-in layer fingerprint (surface option `fingerprint`) is a real
fingerprint file, the same for the same settings, kept only when asked for, with no torch."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.study_helpers import REPO
from trainables.errors import ConfigError, TrainingDiverged
from trainables.measures.fingerprints import FILE_NAME, LayerFingerprint
from trainables.measures.fingerprints.compare import compare
from trainables.settings.config import TrialConfig
from trainables.settings.surface import Surface, surface_of
from trainables.training.synthetic import SyntheticTrial
from trainables.training.trials import new_trial


def trial(surface: dict | None = None, **settings) -> SyntheticTrial:
    config = {"trainable": {"synthetic": surface or {}}, "lr": 5.0e-5, "epochs": 2, **settings}
    made = new_trial(TrialConfig.from_dict(config))
    assert isinstance(made, SyntheticTrial)
    return made


def test_it_evaluates_every_eval_every_steps_and_at_the_end():
    steps = [m["step"] for m in trial({"steps_per_epoch": 20}, eval_every=7).run()]
    assert steps == [7, 14, 21, 28, 35, 40]


def test_without_eval_every_it_evaluates_each_epoch_of_its_data_fraction():
    results = list(trial({"steps_per_epoch": 20}, data_fraction=0.5).run())
    assert [m["step"] for m in results] == [10, 20]  # an epoch of half the data: 10 steps
    assert [m["epoch"] for m in results] == [1.0, 2.0]
    assert results[-1]["final"] == 1 and "final" not in results[0]


def test_max_steps_caps_the_trial():
    assert [m["step"] for m in trial({"steps_per_epoch": 20}, max_steps=25).run()] == [20, 25]


def test_a_resumed_trial_reports_what_an_uninterrupted_one_does(tmp_path):
    surface = {"steps_per_epoch": 30}
    whole = list(trial(surface, eval_every=10, seed=3).run())

    first = trial(surface, eval_every=10, seed=3)
    before = []
    for metrics in first.run():
        before.append(metrics)
        first.save(tmp_path)
        if len(before) == 2:
            break
    second = trial(surface, eval_every=10, seed=3)
    second.restore(tmp_path)
    assert second.step == 20 and not second.finished
    after = list(second.run())

    assert [m["step"] for m in after] == [30, 40, 50, 60]  # nothing trained twice
    assert before + after == whole  # the same floats, final metrics included
    assert second.finished and second.last_metrics == whole[-1]


def test_fail_at_step_raises_on_that_step_after_the_evaluations_before_it():
    run = trial({"steps_per_epoch": 20}, eval_every=10, fail_at_step=25).run()
    assert [next(run)["step"], next(run)["step"]] == [10, 20]
    with pytest.raises(RuntimeError, match="injected failure at step 25"):
        next(run)


def test_a_learning_rate_far_above_the_optimum_diverges_at_once():
    surface = Surface()
    arm = surface.arm({"depth": "full"})
    just_below = surface.optimum_lr(arm) * 10**1.4
    assert len(list(trial(lr=just_below).run())) == 2
    with pytest.raises(TrainingDiverged, match="1.60 decades above"):
        next(trial(lr=surface.optimum_lr(arm) * 10**1.6).run())
    assert len(list(trial({"diverge_above": None}, lr=1.0).run())) == 2  # null: never


def test_each_step_takes_step_s():
    started = time.perf_counter()
    list(trial({"steps_per_epoch": 10, "step_s": 0.02}, epochs=1).run())
    assert time.perf_counter() - started >= 10 * 0.02


def test_step_s_while_a_file_exists_and_no_time_once_it_is_gone(tmp_path):
    pace = tmp_path / "pace"
    pace.touch()
    surface = {"steps_per_epoch": 10, "step_s": 0.05, "step_s_while": str(pace)}
    run = trial(surface, epochs=2).run()
    started = time.perf_counter()
    assert next(run)["step"] == 10  # the first epoch, while the file is there
    assert time.perf_counter() - started >= 10 * 0.05
    pace.unlink()
    assert next(run)["step"] == 20  # the second at once (the line below, without a clock)
    assert Surface(step_s=0.05, step_s_while=str(pace)).seconds_per_step() == 0.0
    pace.touch()
    assert Surface(step_s=0.05, step_s_while=str(pace)).seconds_per_step() == 0.05
    for relative in ("", "pace", "tmp/pace"):  # a worker's own folder would read it
        with pytest.raises(ConfigError, match=r"is not allowed: an absolute file path, or null"):
            surface_of({"synthetic": {"step_s_while": relative}})


def test_the_optimum_moves_as_documented():
    surface = Surface()
    full = surface.arm({"depth": "full"})
    assert surface.optimum_lr(full) == pytest.approx(surface.best_lr)
    half = surface.arm({"depth": 6})  # 0.5 * 6/12 = 0.25 decades up
    assert surface.optimum_lr(half) == pytest.approx(surface.best_lr * 10**0.25)
    fresh = surface.arm({"depth": "full", "reinit_from": 9})  # 3 of 12 fresh: 0.25 decades
    assert surface.optimum_lr(fresh) == pytest.approx(surface.best_lr * 10**0.25)
    tenth = surface.arm({"data_fraction": 0.1})  # 0.25 * log10(10)
    assert surface.optimum_lr(tenth) == pytest.approx(surface.best_lr * 10**0.25)
    at = surface.asymptote(half, surface.optimum_lr(half))
    for off in (-0.5, 0.5):  # lr_penalty per squared decade away
        lr = surface.optimum_lr(half) * 10**off
        assert surface.asymptote(half, lr) == pytest.approx(at - surface.lr_penalty * 0.25)


def test_seed_noise_is_about_one_f1_point_and_shared_across_arms():
    finals = {
        depth: np.array([list(trial(depth=depth, seed=s).run())[-1]["test_f1"] for s in range(300)])
        for depth in ("full", 8)
    }
    for values in finals.values():  # noise 0.01, and the test set's own draw of noise / 2
        assert 0.0095 < values.std() < 0.0130, values.std()  # sqrt(1.25) * noise = 0.0112
    # the seed's shared draw cancels when arms are paired by seed: noise * sqrt(1.5) apart,
    # against noise * sqrt(2.5) between different seeds
    paired = np.std(finals["full"] - finals[8])
    unpaired = np.std(finals["full"] - np.roll(finals[8], 1))
    assert paired < 0.85 * unpaired, (paired, unpaired)


def test_unknown_and_bad_surface_options_are_refused():
    with pytest.raises(ConfigError, match="unknown synthetic surface option"):
        surface_of({"synthetic": {"noize": 0.1}})
    with pytest.raises(ConfigError, match="noise=-1 is not allowed"):
        surface_of({"synthetic": {"noise": -1}})
    with pytest.raises(ConfigError, match="slow_by=0.5 is not allowed: a factor >= 1"):
        surface_of({"synthetic": {"slow_by": 0.5}})
    assert surface_of("tagger") is None and surface_of("synthetic") == Surface()


@pytest.mark.parametrize(
    ("word", "flag"), [("yes", True), ("On", True), ("off", False), (True, True)]
)
def test_a_boolean_surface_option_takes_the_words_every_boolean_setting_takes(word, flag):
    assert surface_of({"synthetic": {"fingerprint": word}}).fingerprint is flag


def test_a_boolean_surface_option_refuses_anything_else_in_one_line():
    with pytest.raises(ConfigError, match="fingerprint='maybe' is not allowed: true or false"):
        surface_of({"synthetic": {"fingerprint": "maybe"}})


@pytest.mark.parametrize(("fraction", "per_epoch"), [(1.0, 20), (0.5, 10)])
def test_a_step_budget_runs_its_steps_at_any_data_fraction(fraction, per_epoch):
    budget = {"steps": 45}
    results = list(trial({"steps_per_epoch": 20}, data_fraction=fraction, budget=budget).run())
    assert [m["step"] for m in results] == [*range(per_epoch, 45, per_epoch), 45]
    final = results[-1]
    assert final["steps_run"] == 45 and final["tokens_seen"] == 45 * Surface.tokens_per_step


def test_until_plateau_stops_keeps_the_best_evaluation_and_resumes_exactly(tmp_path):
    budget = {"until_plateau": {"patience": 2, "min_delta": 0.01, "max_epochs": 20}}
    settings = {"eval_every": 10, "seed": 1, "budget": budget}
    whole = list(trial({"steps_per_epoch": 20}, **settings).run())
    final = whole[-1]
    assert final["steps_run"] < 400  # stopped before max_epochs
    best = int(final["best_evaluation"])
    assert len(whole) == best + 2  # patience 2 after the best
    assert final["dev_f1"] == whole[best - 1]["dev_f1"] and final["best_step"] == best * 10
    first = trial({"steps_per_epoch": 20}, **settings)
    for metrics in first.run():
        first.save(tmp_path)
        if metrics["evaluation"] == best + 1:  # one evaluation of patience spent
            break
    resumed = trial({"steps_per_epoch": 20}, **settings)
    resumed.restore(tmp_path)
    assert list(resumed.run()) == [final]


def test_a_slow_arm_is_still_learning_at_its_end():
    """`slow_arm` makes the arm it names learn `slow_by` times slower: its final gain is large
    where another arm's is about zero."""
    surface = {"slow_arm": {"reinit_from": 12}, "slow_by": 10, "noise": 0.0}  # 12 layers
    slow = list(trial(surface, reinit_from=12, epochs=5).run())[-1]  # re-initialises none
    other = list(trial(surface, epochs=5).run())[-1]  # the same arm, at its own speed
    assert slow["final_gain"] > 0.05 and abs(other["final_gain"]) < 0.005
    assert slow["test_f1"] < other["test_f1"]


def _fingerprinted(surface: dict | None = None, **settings) -> tuple[SyntheticTrial, dict]:
    """A trial run to its end with the stand-in fingerprint asked for, and its final metrics."""
    made = trial({"fingerprint": True, **(surface or {})}, **settings)
    return made, list(made.run())[-1]


def _arrays(fingerprint: LayerFingerprint) -> dict[str, np.ndarray]:
    arrays = {name: np.asarray(fingerprint.tensors[name]) for name in fingerprint.tensors}
    return arrays | {"lengths": fingerprint.lengths, "input_ids": fingerprint.input_ids}


def test_the_fingerprint_option_keeps_a_stand_in_that_its_file_holds(tmp_path):
    kept, final = _fingerprinted(seed=3)
    stand_in = kept.fingerprint
    assert stand_in is not None and stand_in.blocks == 2 and stand_in.heads == 2
    assert final["fingerprint_bytes"] == stand_in.nbytes > 0  # what the driver's callback reads
    assert final["fingerprint_sentences"] == stand_in.sentences == 4
    size = stand_in.save(tmp_path / FILE_NAME)  # as the Tune adapter saves the tagger's
    loaded = LayerFingerprint.load(tmp_path / FILE_NAME)  # as the report reads it back
    assert size > stand_in.nbytes and loaded.meta == stand_in.meta
    assert {k: v.tolist() for k, v in _arrays(loaded).items()} == {
        k: v.tolist() for k, v in _arrays(stand_in).items()
    }
    maps = np.asarray(loaded.attention_maps(0), np.float64)[:, :9].reshape(2, 3, 3)
    assert np.allclose(maps.sum(-1), 1.0, atol=2e-3)  # each query row a distribution


def test_the_stand_in_is_the_same_for_the_same_settings_and_on_the_same_sentences():
    first, _ = _fingerprinted(seed=3)
    again, _ = _fingerprinted(seed=3)
    other, _ = _fingerprinted(seed=4)
    a, b, c = (_arrays(t.fingerprint) for t in (first, again, other))
    assert all(np.array_equal(a[name], b[name]) for name in a)
    assert not np.array_equal(a["hidden.1"], c["hidden.1"])  # another seed, other draws
    assert np.array_equal(a["input_ids"], c["input_ids"])  # on the same "sentences"
    measures = compare(first.fingerprint, other.fingerprint)  # so the report compares them
    assert len(measures["cka"]) == 3 and all(0 < v < 1 for v in measures["cka"])
    assert compare(first.fingerprint, again.fingerprint)["cka"] == [1.0, 1.0, 1.0]


def test_a_resumed_trial_keeps_the_stand_in_an_uninterrupted_one_does(tmp_path):
    whole, _ = _fingerprinted(seed=3, epochs=3)
    first = trial({"fingerprint": True}, seed=3, epochs=3)
    for _ in first.run():
        first.save(tmp_path)
        break
    resumed = trial({"fingerprint": True}, seed=3, epochs=3)
    resumed.restore(tmp_path)
    list(resumed.run())
    a, b = _arrays(whole.fingerprint), _arrays(resumed.fingerprint)
    assert all(np.array_equal(a[name], b[name]) for name in a)


def test_no_stand_in_unless_asked_for_and_kept_as_the_taggers_would_be():
    off = trial(seed=3)  # the default: what a trial reported before the option existed
    assert "fingerprint_bytes" not in list(off.run())[-1] and off.fingerprint is None
    for settings in ({"fingerprint": False}, {"dynamics": "off"}):  # the tagger keeps none
        kept, final = _fingerprinted(**settings)
        assert kept.fingerprint is None and "fingerprint_bytes" not in final
    capped, final = _fingerprinted(fingerprint_max_bytes=1000)  # the first 2 sentences fit
    assert final["fingerprint_sentences"] == 2 and final["fingerprint_bytes"] <= 1000
    whole, _ = _fingerprinted()  # the cap drops the last sentences, as the tagger's does
    assert np.array_equal(capped.fingerprint.hidden_state(2), whole.fingerprint.hidden_state(2, 2))
    none, final = _fingerprinted(fingerprint_max_bytes=10)
    assert none.fingerprint is None and final["fingerprint_bytes"] == 0


_NO_TORCH = """
import json, sys
from trainables.settings.config import TrialConfig
from trainables.training.trials import new_trial
trial = new_trial(TrialConfig.from_dict(
    {"trainable": {"synthetic": {"fingerprint": True}}, "epochs": 1, "lr": 5e-5}))
final = list(trial.run())[-1]
trial.fingerprint.save(sys.argv[1])
print(json.dumps([final["fingerprint_bytes"], sorted(sys.modules)]))
"""


def test_a_trial_keeping_the_stand_in_imports_no_torch(tmp_path):
    """The synthetic trial's worker skips torch's seconds of imports, fingerprint included."""
    done = subprocess.run([sys.executable, "-c", _NO_TORCH, str(tmp_path / FILE_NAME)],
                          cwd=REPO, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    kept, modules = json.loads(done.stdout.splitlines()[-1])
    assert kept > 0 and (tmp_path / FILE_NAME).exists()  # the path ran
    assert "trainables.measures.fingerprints.record" in modules
    heavy = [m for m in modules if m.split(".")[0] in ("torch", "transformers")]
    assert heavy == []
