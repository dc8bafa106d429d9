"""bench/search_ledger.py's committed copy of the search_efficiency cache, against an empty real
MLflow store: a fresh clone finds the ledger's runs by their cache tags (a contender's by the
grid key's prefix too), reads their trials from the ledger, and `--refresh` drops the key's
runs from the file and leaves other keys' alone. (The bench end to end, store and ledger:
tests/study/search/test_search_efficiency_bench.py.)"""

from __future__ import annotations

import pandas as pd
import pytest
import search_ledger


@pytest.fixture(scope="module")
def ledger():
    return search_ledger


def _rows(module, tag: str, value: str, study_run: str, lrs: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {"study": "ner_depth", "cache_tag": tag, "cache_value": value, "study_run": study_run,
         "run_id": [f"{study_run}-{k}" for k in range(len(lrs))], "phase": "confirm",
         "arm": "depth=5", "sample": 0, "seed": 1000, "status": "completed", "lr": lrs,
         "epoch": 3.0, "dev_f1": 0.5, "test_f1": 0.4}
    )  # fmt: skip


def test_fresh_clone_reads_the_ledger_and_refresh_drops_one_key(ledger, tmp_path):
    grid_tag, contender_tag = ledger.TAGS
    path = tmp_path / "ledger.csv"
    lrs = [1.2345678901234e-4, 3e-5]
    ledger.write(path, pd.concat([
        _rows(ledger, contender_tag, "key1:abc", "c1", [1e-4]),
        _rows(ledger, grid_tag, "key2", "g2", [2e-4]),
        _rows(ledger, grid_tag, "key1", "g1", lrs),
    ]))  # fmt: skip
    assert not path.with_name("ledger.csv.partial").exists()
    assert pd.read_csv(path).study_run.tolist() == ["c1", "g1", "g1", "g2"]  # stable order
    cache = ledger.TrialCache(f"sqlite:///{tmp_path / 'empty.db'}", path, "ner_depth",
                              ["dev_f1", "test_f1"])  # fmt: skip
    assert cache.runs(grid_tag, "key1") == ["g1"]
    assert cache.runs(contender_tag, "key1:%") == ["c1"] and cache.runs(contender_tag, "x") == []
    trials = cache.trials("g1")
    assert trials.lr.tolist() == lrs  # learning rates come back exactly, not rounded
    assert list(trials.columns) == [*ledger.TRIAL_COLUMNS, "dev_f1", "test_f1"]
    assert cache.sync() == 0  # the store has nothing to copy in

    assert cache.forget("key1") == 2
    assert pd.read_csv(path).study_run.tolist() == ["g2"]
    assert cache.runs(grid_tag, "key1") == [] and cache.runs(grid_tag, "key2") == ["g2"]
