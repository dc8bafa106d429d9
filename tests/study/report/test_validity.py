"""The report's validity checks on hand-built study records: convergence and budget-sensitive
verdicts, tuning parity and chosen values at the edge of their search, compute parity, seeds
too few for a rank test, metrics on the selection's dev set, and fixed values another study
chose."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from study.analysis import Analysis
from study.names import CODE_TAG, CODE_VERSIONS_TAG
from study.report import provenance, tuning, validity
from study.report.sections import parity, reproducibility, threats
from study.tracking.reading import StudyRecord, budget_columns

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


def test_a_final_gain_without_its_tag_is_judged_by_the_plateau_and_the_tag_wins():
    t = pd.DataFrame({"final_gain": [0.001, 0.2, 0.2, math.nan],
                      "converged": [None, None, "true", None]})  # fmt: skip
    out = budget_columns(t, Analysis(plateau=0.005))
    assert out.converged.tolist()[:3] == ["true", "false", "true"]
    assert pd.isna(out.converged.iloc[3])
    assert out.steps_run.isna().all() and out.tokens_seen.isna().all()


def test_a_trial_until_plateau_stopped_is_converged_whatever_its_gain():
    """The study's declared patience rule ended it: it had stopped improving by that rule."""
    t = pd.DataFrame({"final_gain": [0.2, 0.2, 0.001], "plateau_stopped": [1.0, 0.0, 0.0]})
    out = budget_columns(t, Analysis(plateau=0.005))
    assert out.converged.tolist() == ["true", "false", "true"]


def test_an_arm_still_improving_makes_the_verdict_budget_sensitive_with_its_numbers():
    rows = confirm("A", [2, 3], final_gain=0.001) + confirm("B", [2], final_gain=0.08)
    rows += confirm("B", [3], final_gain=0.002)
    record = make_record(rows)
    table = validity.convergence_table(record).set_index("arm")
    assert table.loc["A", "converged"] == 2 and table.loc["B", "converged"] == 1
    assert validity.converged_text(table.loc["B"].to_dict() | {"arm": "B"}) == "1/2"
    note = validity.budget_note(record, "A", "B")
    assert note.startswith("budget-sensitive") and "`B` still improving in 1/2" in note
    assert "0.08" in note and "plateau 0.005" in note and "`A`" not in note
    [threat] = validity.convergence_threats(record)
    assert "`A` vs `B`" in threat and "`B` still improving" in threat


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
    equal = make_record(confirm("A", [2], steps_run=159.0) + confirm("B", [2], steps_run=170.0))
    assert validity.compute_threats(validity.compute_table(equal)) == []
    unknown = make_record(confirm("A", [2]) + confirm("B", [2]))
    assert validity.compute_threats(validity.compute_table(unknown)) is None


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
    assert "Not recorded, so not checked: convergence, compute" in text


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
