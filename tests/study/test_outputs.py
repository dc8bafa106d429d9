"""A study's outputs go to one folder by default (study/outputs.py), named in its first line,
and a command leaves no sqlite `-wal`/`-shm` beside the stores it opened. The whole smoke study
checks the folder and what is left in it (tests/study/test_smoke_study.py)."""

from __future__ import annotations

import os
from pathlib import Path

from study.command_line import build_parser
from study.export.__main__ import build_parser as export_parser
from study.names import default_tracking_uri, tracking_uri
from study.outputs import (
    DEFAULT_REPORTS,
    DEFAULT_STORAGE,
    OUTPUTS,
    outputs_line,
    stores_closed,
)
from study.report.__main__ import build_parser as report_parser
from study.tracking.start import connect_tracking


def test_every_default_is_in_the_one_folder(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    args = build_parser().parse_args(["ner_depth"])
    assert Path(args.storage) == OUTPUTS / "ray_results" == Path(DEFAULT_STORAGE)
    assert Path(args.reports) == OUTPUTS / "reports" == Path(DEFAULT_REPORTS)
    assert tracking_uri(None) == f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}"
    for parser in (build_parser(), report_parser(), export_parser()):
        assert "sqlite:///outputs/mlflow.db" in " ".join(parser.format_help().split())


def test_the_first_line_names_the_folder(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "outputs"
    line = outputs_line(default_tracking_uri(), str(folder / "ray_results"), DEFAULT_REPORTS,
                        f"sqlite:///{folder / 'optuna.db'}")  # fmt: skip
    assert line.startswith(f"outputs in {folder}/ (")
    moved = outputs_line("http://mlflow:5000", "s3://bucket/x", "none", None)
    assert moved == "outputs: MLflow http://mlflow:5000; Ray results s3://bucket/x; no report " \
                    "(--reports none)"  # fmt: skip


def test_a_command_leaves_no_write_ahead_log(tmp_path):
    """The store's folder is made when the store is opened (after every check), and closing the
    stores as a command returns folds `-wal` and `-shm` back into the database."""
    database = tmp_path / "outputs" / "mlflow.db"
    tracker = connect_tracking(f"sqlite:///{database}", "teststudy")
    run = tracker.study_run("invocation-1", "teststudy/smoke", {"study": "teststudy"}, {})
    tracker.set_tags(run, {"state": "finished"})
    left = sorted(os.listdir(database.parent))
    assert "mlflow.db-wal" in left, left  # WAL mode (study/tracking/sqlite_journal.py)
    assert stores_closed(3) == 3
    assert sorted(os.listdir(database.parent)) == ["mlflow.db"]
    assert tracker.tags(run)["state"] == "finished"  # still usable: it connects again


def test_the_opening_line_names_the_folder(monkeypatch, tmp_path):
    """The line a run prints first, on stdout, before its checks (study.run.opening_line)."""
    from study.command_line import parse_args
    from study.run import opening_line
    from study.spec import load_study

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    spec = load_study("ner_depth", "smoke")
    line = opening_line(spec, parse_args(["ner_depth", "--profile", "smoke"]))
    assert line.endswith(f"; outputs in {tmp_path / 'outputs'}/ (MLflow store, Optuna samples, "
                         "Ray results, report)")  # fmt: skip
    moved = opening_line(spec, parse_args(["ner_depth", "--storage", str(tmp_path / "r")]))
    assert "outputs" not in moved  # each place is named once the checks pass
