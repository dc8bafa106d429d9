"""The report's cross-trial layer sections, from a real MLflow store holding fingerprint
artifacts (synthetic ones: bench/layer_store.py): every pair they compare equals comparing the
fingerprints in memory; which pairs each kind takes; the low-vs-last claim and its interval;
and one line, nothing written, when a report asked for them finds none."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from layer_store import perturbed, write_layer_study
from scipy import stats as scipy_stats

from study import stats
from study.report import layer_pairs, write_report
from study.report.layer_pairs import layer_table
from tests.study_helpers import REPO
from tests.trainables.measures.test_dynamics import batches, pretrained
from trainables.measures.fingerprints.capture import capture
from trainables.measures.fingerprints.compare import compare

SEEDS = [2, 3, 4, 5]


@pytest.fixture(scope="module")
def base():
    return capture(pretrained(), batches())


def _fingerprints(base, drift: float = 0.5):
    """Each trial's synthetic fingerprint, by (arm index, factors, seed); kept for checking."""
    made = {}

    def make(index, factors, seed):
        blocks = factors.get("depth", base.blocks)
        made[(index, seed)] = perturbed(base, 100 * index + seed, drift, blocks)
        return made[(index, seed)]

    return make, made


def _report(tmp_path, uri, name):
    return write_report(uri, name, out=tmp_path / "report",
                        aso={"num_samples": 50, "num_bootstrap_iterations": 50})  # fmt: skip


@pytest.mark.slow  # over ~7 s: the slow tier
def test_layer_sections_from_the_store_equal_comparing_in_memory(tmp_path, base):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    make, made = _fingerprints(base)
    write_layer_study(uri, "depths", [{"depth": 4}, {"depth": 3}], SEEDS, make)
    report = _report(tmp_path, uri, "depths")
    folder = report.folder
    seeds = pd.read_csv(folder / "layers_seeds.csv")
    # every pair of an arm's 4 seeds: 6 pairs; CKA and SVCCA per hidden state, JS per block
    assert seeds.groupby("arm_a").pair.nunique().tolist() == [6, 6]
    assert len(seeds) == 6 * (5 + 5 + 4) + 6 * (4 + 4 + 3)
    for row in seeds[seeds.arm_a == "depth=4"].itertuples():
        expected = compare(made[(0, row.unit_a)], made[(0, row.unit_b)])[row.measure][row.layer]
        assert row.value == expected
    arms = pd.read_csv(folder / "layers_arms.csv")
    assert sorted(set(arms.unit_a)) == SEEDS and set(arms.factor) == {"depth"}
    assert (arms.arm_a == "depth=3").all()  # A: the later grid value, as in the verdicts
    for row in arms.itertuples():  # the three blocks both have
        assert (
            row.value
            == compare(made[(1, row.unit_a)], made[(0, row.unit_a)])[row.measure][row.layer]
        )
    assert not (folder / "layers_data.csv").exists()  # no arm differs in data only
    page = (folder / "README.md").read_text()
    for heading in ("### Layers across seeds", "### Layers across arms", "![layers_seeds]",
                    "![layers_arms]", "jackknife over seeds"):  # fmt: skip
        assert heading in page
    assert {"layers_seeds.png", "layers_arms.png"} <= {p.name for p in folder.iterdir()}


@pytest.mark.slow  # over ~7 s: the slow tier
def test_the_low_layers_are_found_more_alike_when_the_top_ones_drift(tmp_path, base):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    make, _ = _fingerprints(base, drift=1.0)  # noise grows with the layer
    write_layer_study(uri, "drift", [{"depth": 4}], SEEDS, make)
    claim = pd.read_csv(_report(tmp_path, uri, "drift").folder / "layers_seeds_claim.csv")
    cka = claim[claim.measure == "cka"].iloc[0]
    assert (cka.low_layer, cka.last_layer, cka.seeds, cka.pairs) == (1, 4, 4, 6)
    assert 0 < cka.low < cka["mean"] < cka.high
    assert set(claim.reading) == {"low layer more alike"}


@pytest.mark.slow  # over ~7 s: the slow tier
def test_arms_that_differ_in_data_are_their_own_kind(tmp_path, base):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    make, _ = _fingerprints(base)
    arms = [{"reinit_from": k, "data_fraction": f} for k in (2, 4) for f in (0.5, 1.0)]
    write_layer_study(uri, "reinit", arms, SEEDS[:2], make, baseline={"reinit_from": 4})
    folder = _report(tmp_path, uri, "reinit").folder
    design, data = pd.read_csv(folder / "layers_arms.csv"), pd.read_csv(folder / "layers_data.csv")
    # the baseline pairs (k vs none at each fraction), and fraction vs fraction at each k
    assert set(zip(design.arm_a, design.arm_b, strict=True)) == {
        ("reinit_from=2,data_fraction=0.5", "reinit_from=4,data_fraction=0.5"),
        ("reinit_from=2,data_fraction=1.0", "reinit_from=4,data_fraction=1.0"),
    }
    assert set(data.factor) == {"data_fraction"} and data.group.nunique() == 2
    assert "### Layers across data" in (folder / "README.md").read_text()


@pytest.mark.slow  # over ~7 s: the slow tier
def test_a_report_asked_for_layers_of_a_study_that_kept_none_is_one_line(tmp_path, base):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    write_layer_study(uri, "bare", [{"depth": 4}, {"depth": 3}], SEEDS[:2], lambda *_: None)
    out = tmp_path / "asked"
    command = [sys.executable, "-m", "study.report", "bare", "--tracking-uri", uri, "--out",
               str(out), "--layers"]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: study bare"), done.stderr
    assert "kept no layer fingerprints" in lines[0] and "`fingerprint: true`" in lines[0]
    assert not out.exists()
    # not asked for: the report is made, and says in one line how a study would keep them
    page = (_report(tmp_path, uri, "bare").folder / "README.md").read_text()
    assert "The confirm trials kept no layer fingerprints" in page
    assert "### Layers across" not in page


def test_the_seed_pair_interval_is_the_jackknife_over_seeds():
    rng = np.random.default_rng(0)
    effect = dict(zip(SEEDS + [6], rng.normal(0, 1, 5), strict=True))
    values = {(a, b): effect[a] + effect[b] + rng.normal(0, 0.1)
              for a, b in itertools.combinations(effect, 2)}  # fmt: skip
    got = stats.seed_pair_interval(values)
    n = len(effect)
    left_out = [np.mean([v for p, v in values.items() if s not in p]) for s in effect]
    error = math.sqrt((n - 1) / n * np.sum((np.array(left_out) - np.mean(left_out)) ** 2))
    assert got["mean"] == pytest.approx(np.mean(list(values.values())))
    assert got["high"] - got["mean"] == pytest.approx(error * _t(n - 1), rel=1e-9)
    assert (got["seeds"], got["pairs"]) == (5, 10)
    # the pairs share seeds: a t interval over the 10 pairs as if independent is narrower
    naive = stats.t_interval(np.array(list(values.values())), 0.95)
    assert naive[1] - naive[0] < got["high"] - got["low"]
    two = stats.seed_pair_interval({(2, 3): 0.5})
    assert two["mean"] == 0.5 and math.isnan(two["low"])
    missing = dict(list(values.items())[1:])
    assert math.isnan(stats.seed_pair_interval(missing)["low"])


def _t(df: int) -> float:
    return float(scipy_stats.t.ppf(0.975, df))


@pytest.mark.slow  # over ~7 s: the slow tier
def test_the_layer_table_is_computed_once_per_report(tmp_path, base, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    make, _ = _fingerprints(base)
    write_layer_study(uri, "once", [{"depth": 4}, {"depth": 3}], SEEDS[:3], make)
    # one artifact lost (its upload never reached the store): left out, and said so
    next((tmp_path / "mlartifacts").rglob("fingerprint.safetensors")).unlink()
    calls = []
    real = layer_pairs._compared
    monkeypatch.setattr(layer_pairs, "_compared", lambda *a: calls.append(1) or real(*a))
    report = _report(tmp_path, uri, "once")
    assert len(calls) == 1
    shown = [report.tables[name] for name in ("layers_seeds", "layers_arms")]
    assert len(layer_table(report.record)) == sum(len(t) for t in shown)
    assert "1 of them could not be read from the store" in (report.folder / "README.md").read_text()
    # 5 readable trials: 3 + 1 seed pairs, and the 2 seeds both arms still have
    assert report.tables["layers_seeds"].pair.nunique() == 4
    assert report.tables["layers_arms"].pair.nunique() == 2
