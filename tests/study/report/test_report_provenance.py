"""The report's provenance paragraph and its threat of confirm seeds run before under another
design, on a tracking store written by hand: a study run whose confirm seeds an earlier run
of another design used names that run and its seeds as a threat; one on fresh seeds says so
and has none; earlier runs of its own design are named as reuse but are no threat."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from study.analysis import Analysis
from study.names import RUN_KIND, STUDY_KIND
from study.report.sections import declaration, threats
from study.tracking.reading import StudyRecord, budget_columns
from tests.study.tracking.test_seed_history import DAY, add_study_run, confirm

CONFIRM = tuple(range(200, 210))
THIS, OTHER = "d" * 64, "e" * 64  # this run's design, another


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One sqlite store for the module (making one costs seconds), an experiment a test."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('provenance') / 'mlflow.db'}"
    return uri, MlflowClient(uri)


def record(uri: str, name: str, run_id: str) -> StudyRecord:
    """The study run as the report reads it: two arms on the confirm seeds, in order."""
    rows = [{"arm": arm, "phase": "confirm", "seed": s, "test_f1": 0.5, "status": "completed",
             "final_gain": 0.001, "steps_run": 100.0, "tokens_seen": 1e4}
            for arm in "AB" for s in CONFIRM]  # fmt: skip
    trials = budget_columns(pd.DataFrame(rows), Analysis())
    plan = {"search": {}, "fixed": {}, "metric": {"name": "train_loss"}}
    arms = {"B": {"depth": "full"}, "A": {"depth": "full-1"}}
    tags = {RUN_KIND: STUDY_KIND}
    return StudyRecord(name, run_id, uri, tags, plan, arms, {}, trials)


def utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def page(rec: StudyRecord) -> tuple[pd.DataFrame, str, str]:
    """The seed history table, the provenance paragraph and the threats section."""
    table = declaration.history_table(rec)
    text = declaration.SECTION.markdown(rec, {declaration.NAME: table})
    found = threats.SECTION.markdown(rec, {threats.NAME: threats.threats_table(rec)})
    return table, text, found


def test_confirm_seeds_an_earlier_design_ran_are_a_threat_naming_that_run(store):
    uri, client = store
    experiment = client.create_experiment("reused")
    earlier = add_study_run(client, experiment, DAY, confirm(198, 199, 200, 201, 202),
                            study_hash=OTHER)  # fmt: skip
    this = add_study_run(client, experiment, 3 * DAY, confirm(*CONFIRM), study_hash=THIS)
    table, text, found = page(record(uri, "reused", this))
    assert table.run_id.tolist() == [earlier, this]
    assert table.same_design.tolist() == [False, True]
    assert table.seeds.tolist() == ["200-202", "200-209"]
    # declared when the seeds were first used, under the design of that run
    assert text.startswith("## Provenance\n\nThe analysis was declared at " + utc(DAY + 60_000))
    assert f"study run `{earlier}` started" in text and f"study hash `{OTHER[:12]}`" in text
    assert f"another design: this run's, study hash `{THIS[:12]}`" in text
    assert "are **reused**: 1 earlier study run of experiment `reused`" in text
    assert "a threat (below)" in text
    [threat] = declaration.reuse_threats(record(uri, "reused", this))
    assert f"`{earlier}` (started {utc(DAY)}, study hash `{OTHER[:12]}`, seeds 200-202)" in threat
    assert "- **confirm seeds**: This run's confirm seeds were used before under another " in found


def test_fresh_confirm_seeds_are_said_fresh_and_no_threat(store):
    uri, client = store
    experiment = client.create_experiment("fresh")
    add_study_run(client, experiment, DAY, confirm(0, 1, 2), study_hash=OTHER)  # other seeds
    this = add_study_run(client, experiment, 2 * DAY, confirm(*CONFIRM), study_hash=THIS)
    rec = record(uri, "fresh", this)
    table, text, found = page(rec)
    assert table.run_id.tolist() == [this] and table.this_run.tolist() == [True]
    assert f"declared at {utc(2 * DAY + 60_000)}, when the first trial of this study run" in text
    assert f"study hash `{THIS[:12]}` (sha256 of the study run's `study.yaml`, its" in text
    assert "confirm seeds 200-209 are **fresh** in this tracking store" in text
    assert declaration.reuse_threats(rec) == []
    assert "**confirm seeds**" not in found


def test_earlier_runs_of_the_same_design_are_reuse_and_many_are_counted(store):
    uri, client = store
    experiment = client.create_experiment("same")
    same = [add_study_run(client, experiment, i * DAY, confirm(200 + i), study_hash=THIS)
            for i in range(1, 3)]  # fmt: skip
    other = [add_study_run(client, experiment, i * DAY, confirm(200), study_hash=OTHER)
             for i in range(3, 10)]  # fmt: skip
    this = add_study_run(client, experiment, 20 * DAY, confirm(*CONFIRM), study_hash=THIS)
    rec = record(uri, "same", this)
    table, text, _ = page(rec)
    assert table.run_id.tolist() == [*same, *other, this]
    assert f"declared at {utc(DAY + 60_000)}" in text
    assert "(the same design as this run's)" in text and "are **reused**: 9 earlier" in text
    assert f"`{same[0]}` (started {utc(DAY)}, same design, seeds 201)" in text
    assert "; and 4 more (`seed_history.csv` lists every one)." in text
    [threat] = declaration.reuse_threats(rec)
    assert "by 7 earlier study runs" in threat and same[0] not in threat
    assert all(run in threat for run in other[:5]) and other[5] not in threat
    assert "; and 2 more (`seed_history.csv` lists every one)" in threat


def test_a_record_not_read_from_a_store_has_no_provenance():
    rec = record("sqlite://", "s", "run")
    rec.tags.clear()
    assert declaration.seed_uses(rec) is None and declaration.reuse_threats(rec) == []
    assert declaration.history_table(rec).empty
    assert declaration.SECTION.markdown(rec, {declaration.NAME: pd.DataFrame()}) == ""
