"""The tabular benchmark's chain end to end on the synthetic trainable (issue 47, item 4): the
dense grid trained by bench/search_efficiency.py (`--grid-only`) sets `eval_test_each_time`, so
the per-evaluation ledger beside the trials ledger holds a test score at every evaluation; at
each trial's kept evaluation it is the test F1 the trial reported at its end, and the dev
curve, as the evaluations made it, averages to the trial's `curve_area`. Then
bench/search_tabular.py replays the contenders on it. Both run as their own commands."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from tabular_contenders import CONTENDERS

from study import load_trials
from tests.study_helpers import REPO

pytestmark = [pytest.mark.slow, pytest.mark.study]


def _run(*command: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, *command], cwd=REPO, capture_output=True, text=True,
                          timeout=1200)  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done


def test_a_grid_with_test_curves_replays(tmp_path):
    uri, ledger = f"sqlite:///{tmp_path / 'cache.db'}", tmp_path / "grid_trials.csv"
    _run("bench/search_efficiency.py", "--trainable", "synthetic", "--grid-only", "--cache", uri,
         "--ledger", str(ledger), "--out", str(tmp_path / "out"), "--num-cpus", "2")  # fmt: skip
    curves = pd.read_csv(tmp_path / "grid_evaluations.csv")
    trials = load_trials(uri, "ner_depth")
    assert len(trials) == 60 and curves.run_id.nunique() == 60
    assert curves.eval_test_f1.notna().all() and curves.dev_f1.notna().all()
    both = curves.merge(trials[["run_id", "best_step", "test_f1", "curve_area"]], on="run_id")
    kept = both[both.step == both.best_step]
    assert kept.run_id.nunique() == 60
    assert np.allclose(kept.eval_test_f1, kept.test_f1, rtol=0, atol=1e-12)
    made = curves.groupby("run_id").dev_f1.mean()
    area = trials.set_index("run_id").curve_area.loc[made.index]
    assert np.allclose(made, area, rtol=0, atol=1e-9)
    out = tmp_path / "tabular"
    _run("bench/search_tabular.py", "--ledger", str(ledger), "--out", str(out),
         "--repetitions", "20", "--resamples", "50", "--budget", "3")  # fmt: skip
    table = pd.read_csv(out / "contenders_3.csv")
    # every contender of the replay, each once: a contender added or dropped changes this set
    assert sorted(table.contender) == sorted(CONTENDERS)
    assert table.regret.notna().all() and (table.repetitions == 20).all()
