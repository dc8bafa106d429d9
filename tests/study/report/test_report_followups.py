"""What a reader asks next: expected best score for a budget, degenerate runs, reproducibility,
and the initialisation / data-order variance split, on hand-built study records."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from study.report.sections import degenerate, expected_max, reproducibility
from study.report.sections.variance import variance_split, variance_table
from study.tracking.reading import StudyRecord, _trial_table


def record(trials: pd.DataFrame, metric: str = "dev_f1", mode: str = "max", **tags) -> StudyRecord:
    plan = {"search": {"lr": {"type": "loguniform", "low": 1e-5, "high": 1e-3}},
            "metric": {"name": metric, "mode": mode},
            "phases": {"explore": {"samples": 2}, "confirm": {"select": "best"}}}  # fmt: skip
    arms = {arm: {} for arm in dict.fromkeys(trials.arm)}
    return StudyRecord("s", "run", "sqlite://", dict(tags), plan, arms, {}, trials)


def trials(rows) -> pd.DataFrame:
    columns = ["arm", "phase", "status", "error", "seed", "dev_f1", "test_f1", "lr",
               "duration_s"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


@pytest.mark.parametrize("values", [[0.3, 0.5, 0.4, 0.5, 0.1], [0.7], [0.2, 0.2, 0.2, 0.9]])
def test_expected_max_is_the_mean_maximum_over_all_subsets(values):
    got = expected_max.expected_max(values)
    for n in range(1, len(values) + 1):
        maxima = [max(s) for s in itertools.combinations(values, n)]
        assert got[n - 1] == pytest.approx(np.mean(maxima), rel=1e-12)
    assert got[-1] == pytest.approx(max(values)) and got[0] == pytest.approx(np.mean(values))


def test_expected_max_table_uses_confirm_seeds_and_their_hours():
    t = trials([
        ("A", "confirm", "completed", None, 2, 0.40, 0.30, 1e-4, 3600.0),
        ("A", "confirm", "completed", None, 3, 0.50, 0.35, 1e-4, 1800.0),
        ("A", "explore", "completed", None, 0, 0.99, 0.90, 3e-4, 60.0),  # chose: not i.i.d.
    ])  # fmt: skip
    table = expected_max.expected_max_table(record(t))
    assert table.n_trials.tolist() == [1, 2]
    assert table.expected_best_dev_f1.tolist() == pytest.approx([0.45, 0.50])
    assert table.trial_hours.tolist() == pytest.approx([0.75, 1.5])


def test_expected_best_is_the_lowest_for_a_study_that_minimises_its_metric():
    """The smoke study selects on dev_loss: its expected best of n runs is the mean minimum."""
    t = trials([("A", "confirm", "completed", None, s, 0.0, 0.0, 1e-4, 60.0) for s in range(3)])
    t["dev_loss"] = [0.9, 0.5, 0.7]
    table = expected_max.expected_max_table(record(t, metric="dev_loss", mode="min"))
    assert list(table.columns) == ["arm", "n_trials", "trial_hours", "expected_best_dev_loss"]
    pairs = [np.mean([min(c) for c in itertools.combinations([0.9, 0.5, 0.7], n)])
             for n in (1, 2, 3)]  # fmt: skip
    assert table.expected_best_dev_loss.tolist() == pytest.approx(pairs)


def test_degenerate_runs_are_counted_beside_the_mean_over_all_seeds():
    t = trials([
        ("A", "confirm", "completed", None, 2, 0.40, 0.30, 1e-4, 10.0),
        ("A", "confirm", "completed", None, 3, 0.0, 0.0, 1e-4, 10.0),  # all-O: no entity
        ("A", "confirm", "errored", "training diverged: loss is nan", 4, None, None, 1e-4, 5.0),
        ("B", "confirm", "completed", None, 2, 0.42, 0.31, 1e-4, 10.0),
        ("B", "confirm", "errored", "worker died", 3, None, None, 1e-4, 5.0),  # not a divergence
    ])  # fmt: skip
    table = degenerate.degenerate_table(record(t)).set_index("arm")
    assert table.loc["A", "n"] == 3 and table.loc["A", "n_degenerate"] == 2
    assert table.loc["A", "dev_f1_mean_all"] == pytest.approx(0.2)
    assert table.loc["A", "dev_f1_mean_healthy"] == pytest.approx(0.4)
    assert table.loc["B", "n_degenerate"] == 0 and table.loc["B", "rate"] == 0


def test_reproducibility_block_states_what_was_recorded():
    t = trials([
        ("A", "explore", "completed", None, 0, 0.4, 0.3, 3e-4, 1800.0),
        ("A", "confirm", "completed", None, 2, 0.4, 0.3, 1e-4, 3600.0),
    ])  # fmt: skip
    text = reproducibility.reproducibility_block(record(t, hardware="2 cores", code_version="abc"))
    assert "`A` explore 1, confirm 1" in text
    assert "lr ~ loguniform[1e-05, 0.001]" in text
    assert "best mean dev_f1 (max)" in text and "`A` lr=0.0001" in text
    assert "`A` 1.50; total 1.50" in text
    assert "Hardware: 2 cores" in text and "Code `abc`" in text
    assert "Precision of every trial: not recorded" in text  # a study run from before bf16
    bf16 = record(t, hardware="2 cores", precision="bf16")
    assert "Precision of every trial: bf16 (autocast; master weights and AdamW state fp32)" in (
        reproducibility.reproducibility_block(bf16)
    )


def crossed(sd_init: float, sd_data: float, sd_noise: float, a: int, b: int, rng) -> pd.DataFrame:
    init, data = rng.normal(0, sd_init, a), rng.normal(0, sd_data, b)
    rows = [(s, d, 0.5 + init[s] + data[d] + rng.normal(0, sd_noise))
            for s in range(a) for d in range(b)]  # fmt: skip
    return pd.DataFrame(rows, columns=["seed", "data_seed", "test_f1"])


def test_variance_split_recovers_known_components():
    rng = np.random.default_rng(0)
    estimates = [variance_split(crossed(2.0, 1.0, 0.5, 30, 30, rng)) for _ in range(8)]
    assert np.mean([e["init"] for e in estimates]) == pytest.approx(4.0, rel=0.2)
    assert np.mean([e["data"] for e in estimates]) == pytest.approx(1.0, rel=0.25)
    assert np.mean([e["residual"] for e in estimates]) == pytest.approx(0.25, rel=0.05)


def test_variance_split_by_hand_on_a_two_by_two_table():
    # y = [[1, 2], [3, 6]]: grand 3; seed means 1.5, 4.5; data means 2, 4
    frame = pd.DataFrame({"seed": [0, 0, 1, 1], "data_seed": [0, 1, 0, 1],
                          "test_f1": [1.0, 2.0, 3.0, 6.0]})  # fmt: skip
    split = variance_split(frame)
    # MS_seed = 2 * ((1.5-3)^2 + (4.5-3)^2) = 9; MS_data = 2 * (1 + 1) = 4; SS_res = 1
    assert split["residual"] == pytest.approx(1.0)
    assert split["init"] == pytest.approx((9 - 1) / 2)
    assert split["data"] == pytest.approx((4 - 1) / 2)
    assert split["init_share"] == pytest.approx(4 / 6.5) and split["clipped"] == ""


def test_variance_split_refuses_an_incomplete_design_and_clips_negatives():
    frame = pd.DataFrame({"seed": [0, 0, 1], "data_seed": [0, 1, 0], "test_f1": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="every \\(seed, data seed\\) pair exactly once"):
        variance_split(frame)
    flat = pd.DataFrame({"seed": [0, 0, 1, 1], "data_seed": [0, 1, 0, 1],
                         "test_f1": [1.0, 2.0, 2.0, 1.0]})  # fmt: skip
    split = variance_split(flat)
    assert split["init"] == 0.0 and split["data"] == 0.0 and split["clipped"] == "init,data"


def test_variance_table_only_when_data_seeds_are_crossed():
    t = trials([("A", "confirm", "completed", None, s, 0.4, 0.3, 1e-4, 1.0) for s in range(3)])
    assert variance_table(record(t), ["test_f1"]).empty
    frame = crossed(0.02, 0.01, 0.005, 3, 3, np.random.default_rng(1))
    t = pd.DataFrame({"arm": "A", "phase": "confirm", "status": "completed", "error": None,
                      "seed": frame.seed, "data_seed": frame.data_seed, "dev_f1": 0.4,
                      "test_f1": frame.test_f1, "lr": 1e-4, "duration_s": 1.0})  # fmt: skip
    table = variance_table(record(t), ["test_f1"])
    assert table.loc[0, "arm"] == "A" and math.isfinite(table.loc[0, "init"])


def test_expected_max_of_ranks_is_the_closed_form_even_for_many_runs():
    # the best of n ranks drawn from 1..N has mean n (N + 1) / (n + 1); C(1500, 750) overflows
    # a float, so a weight computed without logs would give nan or inf here
    big_n = 1500
    ranks = np.random.default_rng(0).permutation(np.arange(1, big_n + 1))
    n = np.arange(1, big_n + 1)
    assert expected_max.expected_max(ranks) == pytest.approx(n * (big_n + 1) / (n + 1), rel=1e-9)


def test_plot_expected_max_draws_only_a_table_with_rows(tmp_path):
    rec = record(trials([("A", "confirm", "completed", None, 2, 0.4, 0.3, 1e-4, 1.0)]))
    empty = pd.DataFrame(columns=["arm", "n_trials", "trial_hours", "expected_best_dev_f1"])
    assert expected_max.plot_expected_max(rec, empty, tmp_path / "none.png") is None
    table = pd.DataFrame({"arm": ["A", "A"], "n_trials": [1, 2], "trial_hours": [0.5, 1.0],
                          "expected_best_dev_f1": [0.4, 0.5]})  # fmt: skip
    path = expected_max.plot_expected_max(rec, table, tmp_path / "em.png")
    assert path == tmp_path / "em.png" and path.read_bytes()[:4] == b"\x89PNG"


def test_only_a_non_finite_loss_makes_an_errored_run_degenerate():
    errors = ["loss is NaN", "loss=inf at step 40", "Non-finite loss", "training diverged",
              "CUDA out of memory during inference", "see the log for more info"]  # fmt: skip
    t = trials([("A", "confirm", "errored", e, s, None, None, 1e-4, 1.0)
                for s, e in enumerate(errors)])  # fmt: skip
    assert degenerate.degenerate_table(record(t)).loc[0, "n_degenerate"] == 4


def test_reproducibility_block_counts_unfinished_runs_in_study_order():
    t = trials([
        ("A", "confirm", "completed", None, 2, 0.4, 0.3, 1e-4, 60.0),
        ("A", "confirm", "errored", "worker died", 3, None, None, 1e-4, 60.0),
        ("A", "explore", "completed", None, 0, 0.4, 0.3, 1e-4, 60.0),
        ("A", "explore", "pruned", None, 0, 0.1, None, 3e-4, 60.0),
    ])  # fmt: skip
    text = reproducibility.reproducibility_block(record(t))
    assert "`A` explore 2 (1 pruned), confirm 2 (1 errored)." in text


def test_variance_split_by_hand_on_a_two_by_three_table():
    # y = [[1, 2, 3], [5, 5, 8]]: grand 4; seed means 2, 6; data means 3, 3.5, 5.5.
    # MS_seed = 3 * (4 + 4) = 24; MS_data = 2 * (1 + 0.25 + 2.25) / 2 = 3.5; residuals
    # +-0.5 four times and 0 twice: SS_res = 1 on 2 df. A seed mean averages 3 data seeds and
    # a data mean 2 seeds, so a rectangle tells the two divisors apart where a square cannot.
    frame = pd.DataFrame({"seed": [0, 0, 0, 1, 1, 1], "data_seed": [0, 1, 2, 0, 1, 2],
                          "test_f1": [1.0, 2.0, 3.0, 5.0, 5.0, 8.0]})  # fmt: skip
    split = variance_split(frame)
    assert split["residual"] == pytest.approx(0.5)
    assert split["init"] == pytest.approx((24 - 0.5) / 3)
    assert split["data"] == pytest.approx((3.5 - 0.5) / 2)


def test_trial_table_has_each_runs_wall_time_after_its_seed():
    start = pd.Timestamp("2026-01-01 10:00", tz="UTC")
    frame = pd.DataFrame({
        "run_id": ["r1", "r2"], "tags.arm": "A", "tags.phase": "confirm",
        "tags.status": ["completed", "errored"], "tags.sample": "0", "tags.seed": ["1", "2"],
        "start_time": [start, start], "end_time": [start + pd.Timedelta(seconds=90), pd.NaT],
        "metrics.dev_f1": [0.4, np.nan], "params.lr": "0.0001",
    })  # fmt: skip
    table = _trial_table(frame)
    columns = list(table.columns)
    assert columns.index("duration_s") == columns.index("seed") + 1
    assert table.duration_s.iloc[0] == 90.0 and math.isnan(table.duration_s.iloc[1])
