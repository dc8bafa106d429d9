"""bench/search_tabular.py (issue 47, items 1 and 4) on a hand-built per-evaluation ledger: a
known learning curve in lr and epoch with known seed and evaluation noise. Each replay is
checked against a computation that does not go through it: one random lr's expected regret
averaged exactly over the space's lrs; the checkpoint measurement's sds straight from the
table with numpy; the peak model's choice against the curve's own peak."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import search_evaluations as evaluations
import search_ledger
import search_reference
import search_tabular
import tabular_checkpoint
import tabular_contenders as contenders
from tabular_grid import as_grid, trial_values

ARMS = ("depth=5", "depth=6")
LRS = [float(f"{lr:.3g}") for lr in np.geomspace(1e-5, 1e-3, 7)]
SEEDS = list(range(1000, 1006))
EPOCHS = np.arange(1, 9) / 2  # evaluations every half epoch, 4 epochs
PEAK = {"depth=5": -3.9, "depth=6": -4.3}  # log10 lr of each arm's optimum: off the grid


def _curves(noise: float = 0.02, seed: int = 0) -> pd.DataFrame:
    """Every evaluation of every grid trial: dev and test rise as 1 - exp(-epoch) towards a
    top quadratic in log10 lr (one curvature, a peak per arm), plus a seed effect both arms
    share, a trial effect, and evaluation noise (dev and test each their own)."""
    rng = np.random.default_rng(seed)
    shared = dict(zip(SEEDS, rng.normal(0, noise, len(SEEDS)), strict=True))
    rows = []
    for arm in ARMS:
        for lr in LRS:
            top = 0.6 - 0.05 * (math.log10(lr) - PEAK[arm]) ** 2
            for seed in SEEDS:
                own = shared[seed] + rng.normal(0, noise)
                run = f"{arm}-{lr}-{seed}"
                for k, epoch in enumerate(EPOCHS):
                    mean = top * (1 - math.exp(-epoch))
                    dev, test = mean + own + rng.normal(0, noise / 2, size=2)
                    rows.append({"run_id": run, "arm": arm, "lr": lr, "seed": seed,
                                 "evaluation": k + 1, "step": 50 * (k + 1), "epoch": epoch,
                                 "dev_f1": dev, "eval_test_f1": test})  # fmt: skip
    return pd.DataFrame(rows)


def _grid(curves: pd.DataFrame, rule: str = "last", budget: float | None = None):
    return as_grid(trial_values(curves, budget, rule, "dev_f1", "eval_test_f1", 1.0))


def _design(grid, samples: int = 3, confirm: int = 5) -> contenders.Design:
    return contenders.Design(samples, 2, confirm, np.arange(len(grid.lrs)))


def test_one_random_lr_replays_its_exact_expected_regret():
    grid = _grid(_curves())
    # exact: each arm's regret averaged over every lr of the space, then over arms
    test = grid.test.mean(axis=2)
    best = grid.dev.mean(axis=2).argmax(axis=1)
    exact = np.mean([np.mean(test[i, best[i]] - test[i]) for i in range(len(ARMS))])
    assert exact > 0.01  # a curve whose lr matters
    reps = search_tabular.replay(grid, _design(grid), ["random_lr"], 400)
    table = search_tabular.summarize(reps).set_index("contender").loc["random_lr"]
    assert 0 < table.regret_se < 0.01
    assert abs(table.regret - exact) < 4 * table.regret_se


def test_a_budget_cuts_the_curves_and_their_cost():
    curves = _curves()
    whole, cut = _grid(curves), _grid(curves, budget=2.0)
    assert np.all(whole.epochs == 4.0) and np.all(cut.epochs == 2.0)
    at_two = curves[curves.epoch == 2.0].sort_values(["arm", "lr", "seed"])
    assert cut.test.ravel().tolist() == pytest.approx(at_two.eval_test_f1.tolist())


def test_the_checkpoint_measurement_is_the_tables_own_numbers():
    curves = _curves(noise=0.03, seed=5)
    last, best = _grid(curves, "last"), _grid(curves, "best")
    lr_index = contenders.answers(last)
    measured = tabular_checkpoint.measure(last, best, lr_index, 300, np.random.default_rng(1))
    value = measured.set_index(["arm", "quantity"]).value
    # straight from the rows: per arm at its lr, test at the last and at the best-dev evaluation
    picked = {}
    for i, arm in enumerate(ARMS):
        rows = curves[(curves.arm == arm) & (curves.lr == LRS[lr_index[i]])]
        by_seed = rows.sort_values("evaluation").groupby("seed")
        picked[arm] = (
            np.array([g.eval_test_f1.iloc[-1] for _, g in by_seed]),
            np.array([g.eval_test_f1.loc[g.dev_f1.idxmax()] for _, g in by_seed]),
        )
    for arm, (at_last, at_best) in picked.items():
        assert value[(arm, "last_sd")] == pytest.approx(np.std(at_last, ddof=1))
        assert value[(arm, "best_sd")] == pytest.approx(np.std(at_best, ddof=1))
        assert value[(arm, "bias")] == pytest.approx(at_best.mean() - at_last.mean())
    second = ARMS[1]
    for k, rule in enumerate(("last", "best")):
        diff = picked[second][k] - picked[ARMS[0]][k]
        assert value[(second, f"{rule}_pair_sd")] == pytest.approx(np.std(diff, ddof=1))
    assert (measured.se > 0).all()


def test_the_peak_model_finds_a_peak_between_grid_points():
    grid = _grid(_curves(noise=0.0))
    rng = np.random.default_rng(3)
    choice = contenders.peak_model(grid, _design(grid), rng)
    assert np.log10(choice.lrs) == pytest.approx([PEAK[a] for a in ARMS], abs=1e-6)
    assert choice.explore_epochs == 3 * 2 * 2 * 4.0


def test_the_contenders_are_distinct_runs_and_seeds_buy_a_narrower_interval():
    grid = _grid(_curves())
    design = _design(grid)
    reps = search_tabular.replay(grid, design, list(contenders.NAMES), 60)
    lrs = reps.pivot(index="repetition", columns="contender", values="lrs")
    assert (lrs.random_lr != lrs.more_seeds).any() and (lrs.explore != lrs.peak_model).any()
    explore = reps[reps.contender == "explore"]
    assert set(explore.lrs.str.split(";").sum()) <= {f"{lr:.4g}" for lr in LRS}
    assert (explore.explore_epochs == 3 * 2 * 2 * 4.0).all()
    extra = int(contenders.explore_cost(grid, design) // (2 * 4.0))
    assert extra == 6
    seeds = reps.groupby("contender").confirm_seeds.unique()
    assert seeds["more_seeds"].tolist() == [5 + extra] and seeds["explore"].tolist() == [5]
    table = search_tabular.summarize(reps).set_index("contender")
    assert table.half_width["more_seeds"] < table.half_width["random_lr"]


def _ledgers(tmp_path, curves: pd.DataFrame, with_test: bool = True):
    trials = curves.drop_duplicates("run_id").assign(
        study="ner_depth", cache_tag=search_reference.KEY_TAG, cache_value="key1",
        study_run="g1", phase="confirm", sample=0, status="completed", test_f1=0.5,
    )  # fmt: skip
    path = tmp_path / "x_trials.csv"
    search_ledger.write(path, trials[search_ledger.RUN_COLUMNS + search_ledger.TRIAL_COLUMNS
                                     + ["dev_f1", "test_f1"]])  # fmt: skip
    rows = curves.assign(study="ner_depth", study_run="g1")
    if not with_test:
        rows = rows.assign(eval_test_f1=math.nan)
    evaluations.write(
        evaluations.path_beside(path),
        rows[evaluations.EVALUATION_COLUMNS + ["dev_f1", "eval_test_f1"]],
    )
    return path


def test_the_command_replays_the_ledgers_and_refuses_a_grid_without_test_curves(tmp_path, capsys):
    curves = _curves()
    path = _ledgers(tmp_path, curves)
    out = tmp_path / "out"
    code = search_tabular.main(["--ledger", str(path), "--out", str(out), "--repetitions", "20",
                                "--budget", "2", "--resamples", "50"])  # fmt: skip
    assert code == 0
    table = pd.read_csv(out / "contenders_2.csv")
    assert set(table.contender) == set(contenders.NAMES) and (table.repetitions == 20).all()
    assert (out / "checkpoint_2.csv").exists() and (out / "repetitions_2.csv").exists()
    bare = _ledgers(tmp_path / "bare", curves, with_test=False)
    assert search_tabular.main(["--ledger", str(bare), "--out", str(out)]) == 2
    assert search_tabular.RETRAIN in capsys.readouterr().out


def test_a_studys_confirm_trials_give_each_rules_scores_paired_by_seed():
    """bench/checkpoint_choice.py: one lr per arm, as a study runs it. Each trial's kept test
    score is found here straight from its rows (the last row; the row of highest dev), and the
    paired sd against numpy on those."""
    import checkpoint_choice

    curves = _curves(noise=0.03, seed=3)
    one_lr = {"depth=5": LRS[3], "depth=6": LRS[4]}  # each arm its own lr
    study = curves[[one_lr[a] == lr for a, lr in zip(curves.arm, curves.lr, strict=True)]]
    study = study[study.seed != 1005]  # one arm ...
    extra = curves[(curves.arm == "depth=6") & (curves.lr == LRS[4]) & (curves.seed == 1005)]
    study = pd.concat([study, extra])  # ... ran a seed the other did not: left out
    arms, lrs, seeds, scores = checkpoint_choice.scores_by_rule(
        study, "dev_f1", "eval_test_f1", 1.0
    )
    assert seeds == SEEDS[:-1] and lrs == [one_lr[a] for a in arms]
    for i, arm in enumerate(arms):
        for k, seed in enumerate(seeds):
            rows = study[(study.arm == arm) & (study.seed == seed)].sort_values("evaluation")
            assert scores["last"][i, k] == rows.eval_test_f1.iloc[-1]
            assert scores["best"][i, k] == rows.eval_test_f1.loc[rows.dev_f1.idxmax()]
    assert not np.array_equal(scores["last"], scores["best"])
    table = tabular_checkpoint.measure_scores(
        arms, lrs, scores["last"], scores["best"], 200, np.random.default_rng(0)
    )
    pair = table[(table.quantity == "best_pair_sd")].value.iloc[0]
    assert pair == pytest.approx(np.std(scores["best"][1] - scores["best"][0], ddof=1))
    last_pair = np.std(scores["last"][1] - scores["last"][0], ddof=1)
    change = table[(table.quantity == "pairsdchange")].value.iloc[0]
    assert change == pytest.approx(pair - last_pair)
    twice = pd.concat([study, study.assign(run_id=study.run_id + "-again")])
    with pytest.raises(ValueError, match="more than once"):
        checkpoint_choice.scores_by_rule(twice, "dev_f1", "eval_test_f1", 1.0)


def test_kept_only_replays_each_grid_trials_final_scores_without_test_curves(tmp_path):
    """`--kept-only`: the grid from the trials ledger alone (each trial's dev and test as it
    ended) is the grid of each curve's last evaluation; the command replays every contender
    on a ledger without test curves; `grid_lr` runs the grid's pooled best lr in every arm."""
    curves = _curves()
    last = curves.sort_values("evaluation").groupby("run_id").tail(1)
    path = _ledgers(tmp_path, curves, with_test=False)
    trials = search_ledger.read(path).drop(columns=["dev_f1", "test_f1", "epoch"])
    ended = last.set_index("run_id")[["dev_f1", "eval_test_f1", "epoch"]]
    trials = trials.join(ended, on="run_id").rename(columns={"eval_test_f1": "test_f1"})
    search_ledger.write(path, trials)
    args = search_tabular.parse_args(["--ledger", str(path), "--kept-only"])
    kept, expected = search_tabular.kept_grid(args), _grid(curves, "last")
    for name in ("dev", "test", "epochs"):
        assert np.array_equal(getattr(kept, name), getattr(expected, name))
    out = tmp_path / "out"
    code = search_tabular.main(["--ledger", str(path), "--out", str(out), "--kept-only",
                                "--repetitions", "10"])  # fmt: skip
    assert code == 0
    table = pd.read_csv(out / "contenders_kept.csv")
    assert set(table.contender) == set(contenders.NAMES)
    design = _design(kept)
    choice = contenders.grid_lr(kept, design, np.random.default_rng(0))
    pooled = kept.mean_dev().mean(axis=0).argmax()
    assert (choice.lrs == kept.lrs[pooled]).all() and choice.explore_epochs == 0
    # explore's trials (3 samples x 2 seeds x 2 arms) at the space's mean epochs, as seeds
    per_seed = len(kept.arms) * kept.epochs[:, design.space, :].mean()
    explore = 3 * 2 * len(kept.arms) * kept.epochs[:, design.space, :].mean()
    assert choice.extra_seeds == int(explore // per_seed) == 6
    with pytest.raises(SystemExit):
        search_tabular.parse_args(["--ledger", str(path), "--kept-only", "--budget", "2"])
    narrow = ["--ledger", str(path), "--kept-only", "--range", "1e-9", "2e-9", "--out", str(out)]
    assert search_tabular.main(narrow) == 2


def test_kept_only_leaves_out_a_grid_still_being_built(tmp_path):
    """A second key whose grid has one lr so far (a grid trained over several sittings) is not
    a grid yet: `--kept-only` replays the complete one without `--key`, and says which it
    holds when asked for the partial one."""
    curves = _curves()
    path = _ledgers(tmp_path, curves, with_test=False)
    trials = search_ledger.read(path)
    partial = trials[trials.lr == trials.lr.min()].assign(
        cache_value="key2", run_id=lambda rows: rows.run_id + "-2", study_run="g2"
    )
    search_ledger.write(path, pd.concat([trials, partial]))
    whole = search_tabular.kept_grid(
        search_tabular.parse_args(["--ledger", str(path), "--kept-only"])
    )
    assert whole is not None and len(whole.lrs) == curves.lr.nunique()
    asked = search_tabular.parse_args(["--ledger", str(path), "--kept-only", "--key", "key2"])
    assert search_tabular.kept_grid(asked) is None
