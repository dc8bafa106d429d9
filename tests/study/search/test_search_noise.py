"""bench/search_noise.py's model of the dense grid's seed noise, against answers known in
closed form: the floor of two equally good points is the mean of the larger of two normal
draws minus one of them (sd / sqrt(pi)); with no noise the best lr shows no regret, an explore
that samples a point on the best shows none either, and one random sample on a straight curve
loses half its height on average."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import search_noise


@pytest.fixture(scope="module")
def noise():
    return search_noise


def _curve(lrs, dev, sd=0.0, epochs=4.0, seeds=3, arm="depth=5"):
    return pd.DataFrame({"arm": arm, "lr": lrs, "dev": dev, "dev_sd": sd,
                         "test": dev, "seeds_completed": seeds,
                         "trial_epochs": epochs * seeds})  # fmt: skip


def test_floor_of_two_equal_points_is_the_expected_gap_of_two_normal_draws(noise):
    curve = _curve([1e-4, 2e-4], [0.5, 0.5], sd=0.03)
    floor = noise.regret_floor(curve, sd=0.03, seeds=1)
    assert floor == pytest.approx(0.03 / math.sqrt(math.pi), rel=0.03)
    # more grid seeds shrink the noise of each mean by sqrt(seeds)
    assert noise.regret_floor(curve, 0.03, seeds=4) == pytest.approx(floor / 2, rel=0.05)


def test_floor_is_zero_without_noise_and_small_when_the_best_stands_out(noise):
    curve = _curve([1e-5, 1e-4, 1e-3], [0.2, 0.6, 0.3])
    assert noise.regret_floor(curve, 0.0, 3) == 0.0
    assert noise.regret_floor(curve, 0.01, 3) < 1e-6


def test_pooled_sd_leaves_out_the_worse_half(noise):
    curve = _curve([1e-5, 1e-4, 1e-3, 1e-2], [0.0, 0.5, 0.6, 0.1], sd=[0.0, 0.03, 0.04, 0.5])
    assert noise.pooled_sd(curve) == pytest.approx(math.sqrt((0.03**2 + 0.04**2) / 2))
    # minimised: the better half is the low values
    assert noise.pooled_sd(curve, sign=-1.0) == pytest.approx(math.sqrt(0.5**2 / 2))


def test_design_without_noise_finds_a_sampled_best_and_counts_its_epochs(noise):
    curve = _curve([1e-5, 1e-4, 1e-3], [0.2, 0.6, 0.3], epochs=5.0)
    regret, cost = noise.design(curve, 0.0, (1e-5, 1e-3), samples=3, seeds=2, placement="spaced")
    assert regret == pytest.approx(0.0)
    assert cost == pytest.approx(3 * 2 * 5.0)


def test_one_random_sample_on_a_straight_curve_loses_half_its_height(noise):
    curve = _curve([1e-5, 1e-3], [0.0, 1.0])
    regret, _ = noise.design(curve, 0.0, (1e-5, 1e-3), samples=1, seeds=1, placement="random")
    assert regret == pytest.approx(0.5, abs=0.01)


def test_design_table_averages_arms_and_shares_the_grid_cost(noise):
    lrs = [1e-5, 1e-4, 1e-3]
    curves = pd.concat([_curve(lrs, [0.2, 0.6, 0.3], arm="a"),
                        _curve(lrs, [0.3, 0.5, 0.6], arm="b")])  # fmt: skip
    table = noise.design_table(curves, [(1e-5, 1e-3)], [3], [1])
    spaced = table[table.placement == "spaced"].iloc[0]
    assert spaced.regret == pytest.approx(0.0)
    # 2 arms x 3 samples x 1 seed x 4 epochs of a grid of 2 x 3 points x 3 seeds x 4 epochs
    assert spaced.cost_share == pytest.approx(1 / 3)
    assert set(table.placement) == {"random", "spaced"} and np.all(table.regret >= 0)


def test_missing_grid_file_is_one_line_and_exit_2(noise, tmp_path, capsys):
    assert noise.main(["--grid", str(tmp_path / "none.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run bench/search_efficiency.py first" in err[0]
