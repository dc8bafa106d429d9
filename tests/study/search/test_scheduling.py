"""The arm-aware search and pruning logic, driven directly with constructed results."""

from __future__ import annotations

import pytest
import yaml
from optuna.trial import TrialState
from ray.tune.schedulers import TrialScheduler

from study.plan import make_plan
from study.search import ArmSearcher, PlannedSearcher, confirm_configs
from study.spec import load_study
from tests.study_helpers import write_study

CONTINUE, STOP, PAUSE = TrialScheduler.CONTINUE, TrialScheduler.STOP, TrialScheduler.PAUSE


@pytest.fixture
def spec(tmp_path, tiny_model, tiny_corpus):
    path = write_study(
        tmp_path,
        str(tiny_model),
        tiny_corpus,
        search={"lr": {"type": "loguniform", "low": 1.0e-4, "high": 1.0e-2}},
        metric={"name": "dev_f1", "mode": "max"},
    )
    return load_study(str(path), "default")


@pytest.fixture
def searcher(spec):
    return ArmSearcher(spec, make_plan(spec).arms)


def _suggest_all(searcher) -> list[tuple[str, dict]]:
    out = []
    while True:
        trial_id = f"t{len(out)}"
        config = searcher.suggest(trial_id)
        if config == ArmSearcher.FINISHED:
            return out
        out.append((trial_id, config))


def _result(step: int, epoch: float, f1: float, final: bool = False) -> dict:
    return {"step": step, "epoch": epoch, "dev_f1": f1, **({"final": 1.0} if final else {})}


def test_samples_are_emitted_once_per_seed_back_to_back_round_robin_over_arms(searcher):
    suggested = _suggest_all(searcher)
    assert len(suggested) == 2 * 2 * 2  # arms x samples x seeds
    tags = [c["study"] for _, c in suggested]
    assert [(t["arm_index"], t["sample"], t["seed"]) for t in tags] == [
        (0, 0, 0), (0, 0, 1), (1, 0, 0), (1, 0, 1), (0, 1, 0), (0, 1, 1), (1, 1, 0), (1, 1, 1),
    ]  # fmt: skip
    for first, second in zip(suggested[::2], suggested[1::2], strict=True):
        assert first[1]["trial"]["lr"] == second[1]["trial"]["lr"]  # one sample, two seeds
        assert first[1]["trial"]["seed"] != second[1]["trial"]["seed"]


def test_no_arm_draws_one_sample_twice(tmp_path, tiny_model, tiny_corpus):
    """A categorical space as large as the samples asked: each arm gets every value once, so
    no configuration runs twice on the same seeds (seeded TPE alone repeats 3e-3 in arm 1)."""
    path = write_study(tmp_path, str(tiny_model), tiny_corpus)  # lr in {1e-6, 3e-3}, 2 samples
    searcher = ArmSearcher(load_study(str(path), "default"), make_plan(load_study(str(path))).arms)
    suggested = [c for _, c in _suggest_all(searcher)]
    for arm in (0, 1):
        lrs = {c["trial"]["lr"] for c in suggested if c["study"]["arm_index"] == arm}
        assert lrs == {1.0e-6, 3.0e-3}, lrs
    assert len(suggested) == 8


def test_asha_decides_on_the_seed_mean_and_stops_both_seeds(searcher):
    suggested = _suggest_all(searcher)
    (_, a0), (_, a1), _, _, (_, b0), (_, b1), _, _ = suggested  # arm 0: samples a and b
    ta0, ta1, tb0, tb1 = (c["study"] for c in (a0, a1, b0, b1))
    # sample a reaches rung 1 (epoch 1) first with mean 0.5
    assert searcher.decide(ta0, _result(10, 1.0, 0.6)) == CONTINUE
    assert searcher.decide(ta1, _result(10, 1.0, 0.4)) == CONTINUE
    # sample b: one seed alone would beat a's mean (0.7 > 0.5), but the mean (0.35) does not
    assert searcher.decide(tb0, _result(10, 1.0, 0.7)) == CONTINUE  # undecided: seed 1 missing
    assert searcher.decide(tb1, _result(10, 1.0, 0.0)) == STOP
    assert searcher.decide(tb0, _result(20, 2.0, 0.9)) == STOP  # its sibling goes with it
    assert searcher.is_stopped(tb0) and searcher.is_stopped(tb1)
    assert not searcher.is_stopped(ta0)


def test_arms_are_never_compared(searcher):
    suggested = _suggest_all(searcher)
    arm0 = [c["study"] for _, c in suggested if c["study"]["arm_index"] == 0][:2]
    arm1 = [c["study"] for _, c in suggested if c["study"]["arm_index"] == 1][:2]
    for tags in arm0:  # arm 0 sets a high bar at rung 1 ...
        searcher.decide(tags, _result(10, 1.0, 0.9))
    for tags in arm1:  # ... which arm 1's first sample, far below it, is never held to
        assert searcher.decide(tags, _result(10, 1.0, 0.1)) == CONTINUE


def test_a_seed_ahead_waits_at_the_last_rung_for_its_siblings(searcher):
    (_, c0), (_, c1), *_ = _suggest_all(searcher)
    t0, t1 = c0["study"], c1["study"]
    assert searcher.last_rung(t0["arm"]) == 2.0  # epochs 4, grace 1, factor 2: rungs 1 and 2
    for step, epoch in ((10, 1.0), (20, 2.0)):
        decision = searcher.decide(t0, _result(step, epoch, 0.5))
    assert decision == PAUSE and searcher.waiting_at_last_rung(t0)
    assert searcher.decide(t1, _result(10, 1.0, 0.5)) == CONTINUE
    assert searcher.decide(t1, _result(20, 2.0, 0.5)) == CONTINUE
    assert not searcher.waiting_at_last_rung(t0)  # released: may run to the end


def test_a_sibling_that_completed_before_the_last_rung_is_not_waited_for(searcher):
    """With `budget: {until_plateau}` a seed can stop improving, and complete, before the last
    rung; its sibling that reaches the rung goes on (it was paused for good, and the study
    hung: ner_reinit's default profile did)."""
    (i0, c0), (_, c1), *_ = _suggest_all(searcher)
    t0, t1 = c0["study"], c1["study"]
    searcher.decide(t0, _result(10, 1.0, 0.5))
    searcher.decide(t1, _result(10, 1.0, 0.5))
    final = _result(15, 1.5, 0.5, final=True)
    assert searcher.decide(t0, final) == CONTINUE  # rung 2 not reached: it completes
    searcher.on_trial_complete(i0, final)
    assert searcher.decide(t1, _result(20, 2.0, 0.6)) == CONTINUE
    assert not searcher.waiting_at_last_rung(t1) and not searcher.is_stopped(t1)
    assert searcher.decide(t1, _result(40, 4.0, 0.6, final=True)) == CONTINUE


def test_a_seed_that_failed_for_good_releases_and_stops_its_siblings(searcher):
    (_, c0), (i1, c1), *_ = _suggest_all(searcher)
    searcher.decide(c0["study"], _result(10, 1.0, 0.5))
    searcher.decide(c0["study"], _result(20, 2.0, 0.5))
    searcher.on_trial_complete(i1, None, error=True)  # Tune: no retry left
    assert searcher.is_stopped(c0["study"])
    assert not searcher.waiting_at_last_rung(c0["study"])
    assert searcher.decide(c0["study"], _result(30, 3.0, 0.5)) == STOP


def test_a_final_result_waits_too_when_siblings_are_behind(searcher):
    """After --resume a seed paused at the last rung can be restarted by Tune and train to
    the end; its final result must still wait for the sample's last decision."""
    (_, c0), (_, c1), *_ = _suggest_all(searcher)
    t0, t1 = c0["study"], c1["study"]
    searcher.decide(t0, _result(10, 1.0, 0.5))
    assert searcher.decide(t0, _result(40, 4.0, 0.5, final=True)) == PAUSE
    searcher.decide(t1, _result(10, 1.0, 0.5))
    assert searcher.decide(t1, _result(20, 2.0, 0.5)) == CONTINUE
    assert searcher.decide(t0, _result(40, 4.0, 0.5, final=True)) == CONTINUE


def test_seeds_are_matched_by_evaluation_index_not_step(searcher):
    """With a data fraction, seeds draw different subsets and can differ in steps per epoch;
    their n-th evaluations still correspond."""
    (_, a0), (_, a1), _, _, (_, b0), (_, b1), *_ = _suggest_all(searcher)
    for tags, f1 in ((a0["study"], 0.6), (a1["study"], 0.6)):
        searcher.decide(tags, {"step": 10, "evaluation": 1.0, "epoch": 1.0, "dev_f1": f1})
    searcher.decide(b0["study"], {"step": 11, "evaluation": 1.0, "epoch": 1.0, "dev_f1": 0.1})
    decision = searcher.decide(
        b1["study"], {"step": 12, "evaluation": 1.0, "epoch": 1.0, "dev_f1": 0.1}
    )
    assert decision == STOP  # the two seeds' first evaluations were compared as one rung


def test_the_concurrency_gate_holds_back_new_trials(spec):
    limited = ArmSearcher(spec, make_plan(spec).arms)
    limited.max_running = 2
    assert limited.suggest("a") and limited.suggest("b")
    assert limited.suggest("c") is None  # two running or pending: no third trial now
    limited.active_trials = 1  # the scheduler saw one finish
    assert limited.suggest("c") is not None


def test_optuna_is_asked_for_a_sample_only_when_a_slot_is_free(spec, tmp_path):
    """Two slots (the cluster's, no --max-concurrent): the two seeds of arm 0's first sample
    take them; asking for a third trial then creates none and draws nothing from Optuna, so
    the next sample is drawn once a slot frees, not while both still train. The slot count
    is the cluster's, so it is not saved with the searcher."""
    searcher = ArmSearcher(spec, make_plan(spec).arms)
    searcher.slots = 2

    def asked() -> int:
        return sum(len(study.trials) for study in searcher._studies.values())

    assert searcher.suggest("a") and searcher.suggest("b") and asked() == 1
    for _ in range(3):
        assert searcher.suggest("c") is None
    assert asked() == 1  # no slot, no draw
    searcher.active_trials = 1  # the scheduler saw one finish
    assert searcher.suggest("c") is not None and asked() == 2
    searcher.save(str(tmp_path / "state.pkl"))
    fresh = ArmSearcher(spec, make_plan(spec).arms)
    fresh.restore(str(tmp_path / "state.pkl"))
    assert fresh.slots is None and fresh.active_trials == 2


def test_a_finished_trial_frees_its_slot_without_the_scheduler(spec):
    """One slot (--num-cpus 1): once the only trial ends, nothing is running, pending or
    paused, and Tune waits on `suggest` without a scheduler step that would recount; the
    searchers free the slot themselves as the trial completes (a study hung here)."""
    arms = make_plan(spec).arms
    planned = PlannedSearcher(
        spec, confirm_configs(spec, arms, {a.id: [{"lr": 1e-3}] for a in arms})
    )
    explore = ArmSearcher(spec, arms)
    for searcher in (planned, explore):
        searcher.slots = 1
        assert searcher.suggest("a") is not None and searcher.suggest("b") is None
        searcher.on_trial_complete("a", {"dev_f1": 0.5}, error=False)
        assert searcher.suggest("b") is not None


def _finish(searcher, trial_id, config, f1=None, error=False):
    result = _result(40, 4.0, f1, final=True) if f1 is not None else {"dev_f1": 0.1}
    searcher.on_trial_complete(trial_id, result, error=error)


def test_optuna_is_told_complete_pruned_or_failed_per_sample(searcher):
    suggested = _suggest_all(searcher)
    (i0, c0), (i1, c1), (j0, d0), (j1, d1), (k0, e0), (k1, e1), _, _ = suggested
    _finish(searcher, i0, c0, 0.4)
    study = searcher._studies[c0["study"]["arm"]]
    assert study.trials[0].state == TrialState.RUNNING  # one seed is not a sample
    _finish(searcher, i1, c1, 0.6)
    assert study.trials[0].state == TrialState.COMPLETE
    assert study.trials[0].value == pytest.approx(0.5)  # the mean over seeds
    # arm 0, sample 1: stopped at rung 1, told PRUNED with the rung mean, not as a final value
    searcher.decide(e0["study"], _result(10, 1.0, 0.0))
    searcher.decide(e1["study"], _result(10, 1.0, 0.0))
    _finish(searcher, k0, e0)
    _finish(searcher, k1, e1)
    assert study.trials[1].state == TrialState.PRUNED
    assert study.trials[1].intermediate_values == {0: 0.0}
    # arm 1, sample 0: one seed errored
    _finish(searcher, j0, d0, 0.9)
    _finish(searcher, j1, d1, error=True)
    other = searcher._studies[d0["study"]["arm"]]
    assert other.trials[0].state == TrialState.FAIL
    assert searcher.best_samples() == {c0["study"]["arm"]: {"lr": c0["trial"]["lr"]}}


def test_searcher_state_survives_save_and_restore(searcher, spec, tmp_path):
    first = [searcher.suggest(f"t{i}") for i in range(3)]
    searcher.decide(first[0]["study"], _result(10, 1.0, 0.5))
    searcher.save(str(tmp_path / "state.pkl"))
    fresh = ArmSearcher(spec, make_plan(spec).arms)
    fresh.restore(str(tmp_path / "state.pkl"))
    assert fresh.samples.keys() == searcher.samples.keys()
    assert fresh.samples["depth=3#0"].reports == {0: {10: (1.0, 0.5)}}
    assert len(_suggest_all(fresh)) == 8 - 3  # continues where it stopped, asks no sample twice


def test_confirm_runs_every_chosen_sample_on_every_seed_seed_major(spec):
    arms = make_plan(spec).arms
    chosen = {arm.id: [{"lr": 0.001}] for arm in arms}
    configs = confirm_configs(spec, arms, chosen)
    order = [(c["study"]["seed"], c["study"]["arm_index"]) for c in configs]
    assert order == [(2, 0), (2, 1), (3, 0), (3, 1)]  # held-out seeds: explore ran 0 and 1
    assert all(c["study"]["phase"] == "confirm" and c["trial"]["lr"] == 0.001 for c in configs)
    planned = PlannedSearcher(spec, configs)
    got = [planned.suggest(f"t{i}") for i in range(5)]
    assert got[:4] == configs and got[4] == PlannedSearcher.FINISHED


def test_tune_may_start_as_many_trials_at_once_as_fit():
    from study.execution.tuner import trials_at_once

    laptop = {"CPU": 2.0, "memory": 2e10}
    assert trials_at_once({"cpu": 1, "gpu": 0}, laptop, None) == 2
    assert trials_at_once({"cpu": 1, "gpu": 0}, laptop, 1) == 1  # --max-concurrent caps it
    assert trials_at_once({"cpu": 4, "gpu": 0}, laptop, None) == 1  # never 0
    cluster = {"CPU": 64.0, "GPU": 8.0}
    assert trials_at_once({"cpu": 4, "gpu": 1}, cluster, None) == 8  # the GPUs bind first
    assert trials_at_once({"cpu": 4, "gpu": 1}, {"CPU": 64.0}, None) == 1  # no GPU yet


@pytest.mark.parametrize(("grace", "reduction", "max_t"),
                         [(1, 2, 3), (1, 2, 8), (0.5, 3, 10), (2, 2, 2), (1, 4, 100)])  # fmt: skip
def test_asha_milestones_are_rays(grace, reduction, max_t):
    """The one place that looks inside Ray's ASHA: the milestones the searcher computes must
    be the ones Ray's scheduler uses. A Ray upgrade that changes them fails here."""
    from ray.tune.schedulers import AsyncHyperBandScheduler

    from study.search import asha_milestones

    asha = AsyncHyperBandScheduler(time_attr="epoch", metric="m", mode="max", max_t=max_t,
                                   grace_period=grace, reduction_factor=reduction)  # fmt: skip
    rays = sorted(milestone for milestone, _ in asha._brackets[0]._rungs)
    assert asha_milestones(grace, reduction, max_t) == pytest.approx(rays)


def test_explore_starts_from_the_given_samples(tmp_path, tiny_model, tiny_corpus):
    """`explore.start_from`: each arm's first sample is the given one (Optuna's enqueue_trial),
    recorded as drawn by start_from; the sampler draws the rest."""
    path = write_study(tmp_path, str(tiny_model), tiny_corpus)
    data = yaml.safe_load(path.read_text())
    data["search"] = {"lr": {"type": "loguniform", "low": 1.0e-5, "high": 1.0e-3}}
    data["phases"]["explore"]["start_from"] = [{"lr": 1.78e-4}]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    spec = load_study(str(path))
    assert spec.explore.start_from == ({"lr": 1.78e-4},)
    searcher = ArmSearcher(spec, make_plan(spec).arms)
    suggested = [c for _, c in _suggest_all(searcher)]
    for arm in (0, 1):
        lrs = [c["trial"]["lr"] for c in suggested if c["study"]["arm_index"] == arm]
        assert lrs[0] == 1.78e-4 and all(lr != 1.78e-4 for lr in lrs[len(spec.explore.seeds) :])
    firsts = [s for s in searcher.samples.values() if s.index == 0]
    assert {s.drawn_by for s in firsts} == {"start_from"}
    assert {s.drawn_by for s in searcher.samples.values() if s.index > 0} == {"random"}
