"""The report's validity checks on hand-built study records: convergence and budget-sensitive
verdicts, tuning parity and chosen values at the edge of their search, compute parity, seeds
too few for a rank test, metrics on the selection's dev set, and fixed values another study
chose."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr

from study.analysis import Analysis
from study.names import CODE_TAG, CODE_VERSIONS_TAG
from study.report import provenance, tuning, validity
from study.report.sections import parity, reproducibility, threats
from study.tracking.reading import StudyRecord, budget_columns
from trainables.settings import TUNABLE, TrialConfig

SEARCH = {"lr": {"type": "loguniform", "low": 3e-5, "high": 3e-4}}


def make_record(rows: list[dict], search=None, fixed=None, tags=None, metric="dev_f1"):
    """Two arms differing in one factor: one primary pair, A (listed later) against B."""
    t = pd.DataFrame(rows)
    t = budget_columns(t.assign(status=t.get("status", "completed")), Analysis())
    plan = {"search": search or {}, "fixed": fixed or {}, "metric": {"name": metric}}
    arms = {"B": {"depth": "full"}, "A": {"depth": "full-1"}}
    return StudyRecord("s", "run", "sqlite://", dict(tags or {}), plan, arms, {}, t)


def confirm(arm: str, seeds, **values) -> list[dict]:
    return [{"arm": arm, "phase": "confirm", "seed": s, "test_f1": 0.5, **values} for s in seeds]


def explore(arm: str, lrs, seed: int = 0) -> list[dict]:
    return [{"arm": arm, "phase": "explore", "seed": seed, "lr": lr} for lr in lrs]


def test_a_final_gain_is_judged_by_the_plateau_over_its_tag_which_stands_only_without_one():
    """The tag is the driver's verdict under the rule of its day (an old one trusted
    until_plateau's stop): where a final_gain was recorded the declared rule on it decides."""
    t = pd.DataFrame({"final_gain": [0.001, 0.2, 0.2, math.nan, math.nan],
                      "converged": [None, None, "true", "false", None]})  # fmt: skip
    out = budget_columns(t, Analysis(plateau=0.005))
    assert out.converged.tolist()[:4] == ["true", "false", "false", "false"]
    assert pd.isna(out.converged.iloc[4])
    assert out.steps_run.isna().all() and out.tokens_seen.isna().all()


def test_a_trial_until_plateau_stopped_is_not_converged_while_its_curve_still_rose():
    """Patience running out is recorded (plateau_stopped), not taken as convergence."""
    t = pd.DataFrame({"final_gain": [0.2, 0.2, 0.001, 0.001],
                      "plateau_stopped": [1.0, 0.0, 0.0, 1.0]})  # fmt: skip
    out = budget_columns(t, Analysis(plateau=0.005))
    assert out.converged.tolist() == ["false", "false", "true", "true"]
    assert out.plateau_stopped.tolist() == [1.0, 0.0, 0.0, 1.0]
    assert not Analysis().converged(0.2) and Analysis().converged(0.001)
    assert not Analysis().converged(math.nan)
    with pytest.raises(TypeError):
        Analysis().converged(0.2, True)  # no shortcut left to pass


def test_an_arm_still_improving_makes_the_verdict_budget_sensitive_with_its_numbers():
    rows = confirm("A", [2, 3], final_gain=0.001) + confirm("B", [2], final_gain=0.08)
    rows += confirm("B", [3], final_gain=0.002)
    record = make_record(rows)
    table = validity.convergence_table(record).set_index("arm")
    assert table.loc["A", "converged"] == 2 and table.loc["B", "converged"] == 1
    assert validity.converged_text(table.loc["B"].to_dict() | {"arm": "B"}) == "1/2"
    note = validity.budget_note(record, "A", "B")
    assert note.startswith("budget-sensitive") and "`B` still improving in 1/2" in note
    assert "seed 2 (final_gain 0.08)" in note and "plateau 0.005" in note and "`A`" not in note
    [threat] = validity.convergence_threats(record)
    assert "`A` vs `B`" in threat and "`B` still improving" in threat


def test_every_confirm_trial_at_or_above_the_plateau_is_named_stopped_or_not():
    """Seeds by name, with their gains, whatever stopped them; an arm in no primary
    comparison is named too."""
    rows = confirm("A", [2, 3, 4], final_gain=0.001, plateau_stopped=1.0)
    rows[1]["final_gain"] = 0.005  # at the plateau: not converged
    rows += confirm("B", [2, 3, 4], final_gain=0.02, plateau_stopped=1.0)
    rows += confirm("C", [2, 3], final_gain=0.03)
    t = pd.DataFrame(rows)
    t = budget_columns(t.assign(status="completed"), Analysis())
    arms = {"B": {"depth": "full", "frac": 1}, "A": {"depth": "full-1", "frac": 1},
            "C": {"depth": "full-1", "frac": 0.5}}  # fmt: skip
    tags = {"compare_baseline": json.dumps({"depth": "full"})}  # C has no baseline arm
    record = StudyRecord("s", "run", "sqlite://", tags, {}, arms, {}, t)
    assert validity.primary_pairs(record) == [("A", "B")]
    pair, other = validity.convergence_threats(record)
    assert "`A` still improving in 1/3 confirm seeds: seed 3 (final_gain 0.005)" in pair
    assert "`B` still improving in 3/3 confirm seeds: seed 2 (final_gain 0.02), seed 3 " in pair
    assert "seed 2 (final_gain 0.03), seed 3 (final_gain 0.03)" in other
    assert other.startswith("`C` still improving in 2/2") and "no primary comparison" in other
    table = validity.convergence_table(record).set_index("arm")
    assert table.converged.to_dict() == {"B": 0, "A": 2, "C": 0}


def test_convergence_not_recorded_is_said_not_passed():
    record = make_record(confirm("A", [2, 3]) + confirm("B", [2, 3]))
    assert validity.convergence_threats(record) is None
    row = validity.convergence_table(record).iloc[0].to_dict()
    assert validity.converged_text(row) == "not recorded"
    assert validity.budget_note(record, "A", "B") == ""


@pytest.mark.parametrize(
    ("chosen", "sampled", "dist", "flag"),
    [
        (1.57e-4, [4e-5, 9e-5, 1.57e-4], SEARCH["lr"], "the largest of 3 sampled"),
        (4e-5, [4e-5, 9e-5, 1.57e-4], SEARCH["lr"], "the smallest of 3 sampled"),
        (9e-5, [4e-5, 9e-5, 1.57e-4], SEARCH["lr"], ""),
        # log scale: 3.3e-5 is 4% of the way from 3e-5 to 3e-4, linear it would be 0.1%
        (2.8e-4, [3.3e-5, 2.8e-4, 2.9e-4], SEARCH["lr"], "in the top 10% of its range"),
        (0.95, [0.5, 0.95, 0.99], {"type": "uniform", "low": 0, "high": 1}, "top 10%"),
        (0.5, [0.2, 0.5, 0.8], {"type": "uniform", "low": 0, "high": 1}, ""),
        ("adamw", ["adamw", "sgd"], {"type": "categorical", "choices": ["adamw", "sgd"]}, ""),
    ],
)
def test_edge_flag(chosen, sampled, dist, flag):
    got = tuning.edge_flag(chosen, sampled, dist)
    assert (flag in got) if flag else got == ""


def test_range_position_is_on_a_log_scale_for_a_log_distribution():
    assert tuning.range_position(math.sqrt(3e-5 * 3e-4), SEARCH["lr"]) == pytest.approx(0.5)
    assert tuning.range_position(0.25, {"type": "uniform", "low": 0, "high": 1}) == 0.25
    assert tuning.range_position(3, {"type": "categorical", "choices": ["a"]}) is None


def test_tuning_parity_flags_the_edge_and_an_arm_tuned_alone():
    rows = explore("A", [4e-5, 9e-5, 1.57e-4]) + confirm("A", [2, 3], lr=1.57e-4)
    rows += confirm("B", [2, 3], lr=1e-4)  # B ran no explore: its lr was not tuned for it
    record = make_record(rows, search=SEARCH)
    table = tuning.tuning_table(record).set_index("arm")
    assert table.loc["A", "how"] == "tuned for the arm (3 explore samples)"
    assert table.loc["B", "how"] == "searched, not explored"
    assert "largest of 3" in table.loc["A", "edge"]
    [edge] = tuning.edge_threats(tuning.tuning_table(record))
    assert edge.startswith("`A`: lr = 0.000157 is the largest")
    [unequal] = tuning.parity_threats(record, tuning.tuning_table(record))
    assert unequal == "`A` vs `B`: lr was tuned for `A` only."


def test_the_tuning_table_shows_a_small_chosen_value_as_it_was_sampled():
    """A chosen lr of 0.000157 reads so in the table, as in the sampled list beside it and in
    the threat, not as 0.0002."""
    rows = explore("A", [4e-5, 9e-5, 1.57e-4]) + confirm("A", [2, 3], lr=1.57e-4)
    rows += explore("B", [4e-5, 1.2e-4]) + confirm("B", [2, 3], lr=1.2e-4)
    record = make_record(rows, search=SEARCH)
    text = parity.SECTION.markdown(record, parity.SECTION.tables(record))
    [row] = [line for line in text.splitlines() if "| A | lr |" in line]
    assert "| 0.000157 | 4e-05, 9e-05, 0.000157 |" in row


def test_nothing_tuned_for_any_arm_is_a_threat_with_the_fixed_values():
    record = make_record(confirm("A", [2]) + confirm("B", [2]), fixed={"lr": 2e-4, "epochs": 3})
    table = tuning.tuning_table(record)
    assert set(table.how) == {"fixed for all arms"} and set(table.setting) == {"lr"}
    [threat] = tuning.parity_threats(record, table)
    assert "Tuned for no arm: lr = 0.0002 (fixed for all arms)" in threat


def test_the_table_weighs_the_fixed_settings_marked_tunable():
    """A study that fixes every trial setting: the table weighs the optimisation settings (the
    fields marked `tunable`, in their order), not its seeds, precision, data or length."""
    fixed = TrialConfig().to_dict()
    record = make_record(confirm("A", [2]) + confirm("B", [2]), fixed=fixed)
    shown = tuning.settings(record)
    assert shown == list(TUNABLE)
    assert {"lr", "head_lr", "weight_decay", "warmup_ratio", "batch_size"} <= set(shown)
    assert not {"seed", "data_seed", "precision", "data", "epochs", "depth"} & set(shown)
    assert set(tuning.tuning_table(record).setting) == set(TUNABLE)


def test_compute_parity_flags_a_gap_above_ten_percent():
    assert validity.relative_gap(110.0, 100.0) == pytest.approx(0.1)
    assert math.isnan(validity.relative_gap(math.nan, 100.0))
    rows = confirm("A", [2, 3], steps_run=212.0, tokens_seen=5e4)
    rows += confirm("B", [2, 3], steps_run=159.0, tokens_seen=4.9e4)
    table = validity.compute_table(make_record(rows))
    assert table.steps_run_gap.iloc[0] == pytest.approx(212 / 159 - 1)
    assert bool(table.unequal.iloc[0])
    [threat] = validity.compute_threats(table)
    assert "optimizer steps 212 vs 159 (+33%)" in threat and "tokens" not in threat
    assert "(over 2 paired seeds the optimizer steps differ by a median 33%" in threat
    equal = make_record(confirm("A", [2], steps_run=159.0) + confirm("B", [2], steps_run=170.0))
    assert validity.compute_threats(validity.compute_table(equal)) == []
    unknown = make_record(confirm("A", [2]) + confirm("B", [2]))
    assert validity.compute_threats(validity.compute_table(unknown)) is None


def with_steps(rows: list[dict], steps: list[float], **per_row) -> list[dict]:
    """Each row with its own steps_run (and each other column's own value)."""
    columns = {"steps_run": steps, **per_row}
    return [row | {k: v[i] for k, v in columns.items()} for i, row in enumerate(rows)]


def test_compute_parity_per_seed_reports_the_median_and_largest_gap_behind_equal_means():
    """Equal means (145 steps each) hide seeds that ran twice as long in one arm."""
    rows = with_steps(confirm("A", [2, 3, 4, 5]), [100.0, 200.0, 150.0, 130.0])
    rows += with_steps(confirm("B", [2, 3, 4, 5, 6]), [200.0, 100.0, 150.0, 117.0, 158.0])
    table = validity.compute_table(make_record(rows))
    row = table.iloc[0]
    assert row.steps_run_gap == 0 and not row.unequal
    gaps = [1.0, 1.0, 0.0, 130 / 117 - 1]  # seed 6 ran in B only: not paired
    assert row.steps_run_seeds == 4
    assert row.steps_run_seed_gap_median == pytest.approx(np.median(gaps))
    assert row.steps_run_seed_gap_max == pytest.approx(1.0)
    assert row.steps_run_seed_gap_max_seed == 2 and row.unequal_per_seed
    [threat] = validity.compute_threats(table)
    assert threat.startswith("`A` vs `B`: unequal compute per seed: over 4 paired seeds")
    assert "median 56% and at most 100% (seed 2), above 10%, though the means agree" in threat
    steady = make_record(confirm("A", [2, 3], steps_run=100.0)
                         + confirm("B", [2, 3], steps_run=105.0))  # fmt: skip
    row = validity.compute_table(steady).iloc[0]
    assert row.steps_run_seed_gap_median == pytest.approx(0.05) and not row.unequal_per_seed
    assert validity.compute_threats(validity.compute_table(steady)) == []


def test_compute_parity_per_seed_averages_a_seeds_data_seeds_when_crossed():
    data_seeds = [0, 1, 0, 1]
    rows = with_steps(confirm("A", [2, 2, 3, 3]), [100.0, 300, 100, 100], data_seed=data_seeds)
    rows += with_steps(confirm("B", [2, 2, 3, 3]), [200.0] * 4, data_seed=data_seeds)
    row = validity.compute_table(make_record(rows)).iloc[0]
    assert row.steps_run_seeds == 2 and row.steps_run_seed_gap_max == pytest.approx(1.0)
    assert row.steps_run_seed_gap_max_seed == 3 and row.steps_run_seed_gap_median == 0.5


def stopping_rows(gaps, diffs) -> list[dict]:
    """Per seed 2, 3, ...: A ran 500 + gap steps and scored 0.5 + diff, B 500 and 0.5."""
    rows = []
    for seed, (gap, diff) in enumerate(zip(gaps, diffs, strict=True), start=2):
        rows += confirm("A", [seed], steps_run=500.0 + gap) + confirm("B", [seed], steps_run=500.0)
        rows[-2]["test_f1"] = 0.5 + diff
    return rows


GAPS = [-100.0, -50.0, 0.0, 50.0, 100.0, 150.0]


def test_differences_that_track_the_step_gaps_are_a_stopping_point_threat():
    noise = [0.002, -0.001, 0.0, 0.001, -0.002, 0.0]
    diffs = [0.0001 * g + d for g, d in zip(GAPS, noise, strict=True)]
    record = make_record(stopping_rows(GAPS, diffs))
    [row] = validity.stopping_table(record).to_dict("records")
    r, p = pearsonr(GAPS, diffs)  # independently: scipy on the numbers as built
    assert row["n"] == 6 and row["r"] == pytest.approx(r) and row["p"] == pytest.approx(p)
    assert row["r"] == pytest.approx(np.corrcoef(GAPS, diffs)[0, 1]) and row["flagged"]
    [threat] = validity.stopping_threats(record)
    assert threat.startswith("`A` vs `B`: *stopping-point* threat: over 6 seeds")
    assert f"Pearson r = {r:+.2f}, p = {p:.3g}" in threat and "`test_f1` (A − B)" in threat
    assert "p < 0.1 or |r| ≥ 0.5 with at least 4 seeds" in threat
    text = threats.SECTION.markdown(record, {threats.NAME: threats.threats_table(record)})
    assert "- **stopping point**: `A` vs `B`: *stopping-point* threat" in text


def test_differences_that_do_not_track_the_step_gaps_are_no_threat():
    record = make_record(stopping_rows(GAPS, [0.01, -0.01, -0.01, 0.01, 0.01, -0.01]))
    [row] = validity.stopping_table(record).to_dict("records")
    assert abs(row["r"]) < 0.5 and row["p"] > 0.1 and not row["flagged"]
    assert validity.stopping_threats(record) == []
    # tracking perfectly over 3 seeds: too few to tell
    few = make_record(stopping_rows(GAPS[:3], [-0.01, 0.0, 0.01]))
    [row] = validity.stopping_table(few).to_dict("records")
    assert row["r"] == pytest.approx(1.0) and not row["flagged"]
    assert validity.stopping_threats(few) == []
    # steps not recorded: not checked
    assert validity.stopping_threats(make_record(confirm("A", [2]) + confirm("B", [2]))) is None


@pytest.mark.parametrize(("seeds", "threat"), [(4, True), (5, True), (6, False)])
def test_too_few_seeds_for_a_rank_test(seeds, threat):
    record = make_record(confirm("A", range(seeds)) + confirm("B", range(seeds)))
    found = validity.rank_test_threats(record)
    assert bool(found) == threat
    if threat:
        assert f"n = {seeds} seeds" in found[0] and f"{2 / 2**seeds:.3g} > α = 0.05" in found[0]


def test_dev_metrics_are_flagged_only_when_explore_selected_on_dev():
    rows = explore("A", [1e-4]) + explore("B", [1e-4]) + confirm("A", [2]) + confirm("B", [2])
    [threat] = validity.dev_reuse_threats(make_record(rows, search=SEARCH))
    assert "`dev_f1`, `curve_area`, `steps_to_95`" in threat and "primary" not in threat
    primary = make_record(rows, search=SEARCH, tags={"analysis": Analysis("dev_f1").to_json()})
    assert "**The primary metric `dev_f1`" in validity.dev_reuse_threats(primary)[0]
    assert validity.dev_reuse_threats(make_record(rows, search=SEARCH, metric="test_f1")) == []
    assert validity.dev_reuse_threats(make_record(confirm("A", [2]) + confirm("B", [2]))) == []


def test_a_fixed_value_from_another_study_warns_louder_on_shared_confirm_seeds():
    tag = {"fixed_from": json.dumps({"lr": {"study": "ner_depth", "seeds": [0, 1]}})}
    shared = make_record(confirm("A", [0, 1, 2]) + confirm("B", [0, 1, 2]),
                         fixed={"lr": 1.5e-4}, tags=tag)  # fmt: skip
    how = tuning.tuning_table(shared).how
    assert set(how) == {"fixed for all arms (chosen by ner_depth on seeds [0, 1])"}
    [threat] = validity.fixed_from_threats(shared)
    assert "lr = 0.00015" in threat and "`ner_depth` chose on its seeds [0, 1]" in threat
    assert "**Seeds [0, 1] are also confirm seeds here**" in threat
    apart = make_record(confirm("A", [5]) + confirm("B", [5]), fixed={"lr": 1.5e-4}, tags=tag)
    assert "also confirm seeds" not in validity.fixed_from_threats(apart)[0]


def fine_rows() -> list[dict]:
    """Both arms tuned alike (a middle lr of three), converged, on equal compute, 6 seeds."""
    rows = explore("A", [4e-5, 1e-4, 2e-4]) + explore("B", [4e-5, 1e-4, 2e-4])
    for arm in "AB":
        rows += confirm(arm, range(2, 8), lr=1e-4, final_gain=0.001, steps_run=100.0,
                        tokens_seen=1e4)  # fmt: skip
    return rows


def test_the_threats_section_says_which_checks_ran_when_none_found():
    # explore selected on a training metric: no compared metric is measured on its data
    record = make_record(fine_rows(), search=SEARCH, metric="train_loss")
    table = threats.threats_table(record)
    assert table.empty
    text = threats.SECTION.markdown(record, {threats.NAME: table})
    assert text.startswith("## Threats to validity\n\nNo threat found. Checks that ran: ")
    for check in threats.CHECKS:
        assert check in text
    assert "Not recorded" not in text


def test_the_threats_section_lists_each_threat_and_what_was_not_recorded():
    rows = [{k: v for k, v in r.items() if k not in ("final_gain", "steps_run", "tokens_seen")}
            for r in fine_rows()]  # fmt: skip
    record = make_record(rows, search=SEARCH)  # selected on dev_f1
    table = threats.threats_table(record)
    text = threats.SECTION.markdown(record, {threats.NAME: table})
    assert "- **dev reuse**: Explore chose each arm's lr on `dev_f1`" in text
    assert "No threat found" not in text
    assert "Not recorded, so not checked: convergence, compute, stopping point" in text


def test_the_reproducibility_block_shows_each_arms_budget_when_one_was_set():
    same = make_record(
        confirm("A", [2], budget={"steps": 600}) + confirm("B", [2], budget={"steps": 600})
    )
    assert "- Budget: {'steps': 600} for every arm." in reproducibility.reproducibility_block(same)
    apart = make_record(
        confirm("A", [2], budget={"steps": 600}) + confirm("B", [2], budget={"steps": 900})
    )
    assert "`A` {'steps': 600}; `B` {'steps': 900}" in reproducibility.reproducibility_block(apart)
    assert "Budget" not in reproducibility.reproducibility_block(make_record(confirm("A", [2])))


def test_a_study_resumed_with_other_code_says_so_where_its_code_is_named():
    rows = fine_rows()
    one = make_record(rows, search=SEARCH, tags={CODE_TAG: "abc"})  # recorded before the list
    assert provenance.code_text(one) == "`abc`" and provenance.code_threats(one) == []
    tags = {CODE_TAG: "abc", CODE_VERSIONS_TAG: json.dumps(["abc", "def+dirty"])}
    mixed = make_record(rows, search=SEARCH, tags=tags)
    assert provenance.code_text(mixed) == "`abc`, resumed with `def+dirty`"
    [threat] = provenance.code_threats(mixed)
    assert "resumed with other code (`abc`, resumed with `def+dirty`)" in threat
    assert "- **code**: The study was resumed" in threats.SECTION.markdown(
        mixed, {threats.NAME: threats.threats_table(mixed)}
    )
    assert "- Code `abc`, resumed with `def+dirty`, model" in (
        reproducibility.reproducibility_block(mixed)
    )


@pytest.mark.parametrize(
    ("drawn", "sampler", "how"),
    [
        (["random"] * 3, None, "3 explore samples, all drawn at random: TPE's model drew none"),
        (
            ["random", "random", "tpe"],
            "tpe",
            "3 explore samples, 1 drawn by TPE's model, 2 at random",
        ),
        (["random", "gp", "gp"], "gp", "3 explore samples, 2 drawn by GP's model, 1 at random"),
        (["random"] * 3, "random", "3 explore samples, random search"),
        ([None] * 3, None, "3 explore samples"),  # a study run before the record existed
        ([""] * 3, None, "3 explore samples"),
    ],
)
def test_tuning_parity_says_who_drew_the_explore_samples(drawn, sampler, how):
    lrs = [4e-5, 9e-5, 1.2e-4]
    rows = [
        {"arm": "A", "phase": "explore", "seed": seed, "sample": k, "lr": lr, "drawn_by": by}
        for k, (lr, by) in enumerate(zip(lrs, drawn, strict=True))
        for seed in (0, 1)
    ]
    record = make_record(rows + confirm("A", [2, 3], lr=9e-5) + confirm("B", [2, 3], lr=1e-4),
                         search=SEARCH)  # fmt: skip
    if sampler:
        record.plan["phases"] = {"explore": {"sampler": sampler}}
    table = tuning.tuning_table(record).set_index("arm")
    assert table.loc["A", "how"] == f"tuned for the arm ({how})"


def test_asha_with_few_samples_per_arm_is_a_threat():
    """Explore pruned by ASHA with fewer than 6 samples per arm is named; with 6 or more, or
    without ASHA, it is not."""
    record = make_record(confirm("A", [2, 3]) + confirm("B", [2, 3]))
    for explore, found in (({"samples": 3, "asha": {"grace_period": 1}}, True),
                           ({"samples": 6, "asha": {"grace_period": 1}}, False),
                           ({"samples": 3}, False), ({}, False)):  # fmt: skip
        record.plan["phases"] = {"explore": explore}
        threats_found = validity.pruning_threats(record)
        assert bool(threats_found) == found, (explore, threats_found)
    record.plan["phases"] = {"explore": {"samples": 3, "asha": {"grace_period": 1}}}
    assert "ASHA at 3 samples per arm (fewer than 6)" in validity.pruning_threats(record)[0]
    table = threats.threats_table(record)
    assert (table.check == "pruning").sum() == 1 and table[table.check == "pruning"].recorded.all()
