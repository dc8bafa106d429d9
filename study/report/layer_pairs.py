"""Fine-tuned encoders compared with each other, layer by layer, from MLflow alone.

Every completed confirm trial that kept a layer fingerprint has it as an artifact of its
trial run (study/tracking/artifacts.py). Three kinds of pair are compared:

- `seeds`: two seeds of one arm (every pair of the arm's confirm seeds);
- `arms`: two arms the study compares (`study.stats.arm_pairs`, the pairs of its verdicts)
  at the same seed, when they differ in a design factor (depth, re-initialisation, ...);
- `data`: two arms that differ only in the data they learn from (`DATA_FACTORS`), at the
  same seed.

The table has one row per pair, measure and layer. It is computed once per report (the three
sections share it) and needs nothing but the tracking store.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from study import stats
from study.tracking.artifacts import read_fingerprints
from study.tracking.reading import StudyRecord
from trainables.errors import UserInputError
from trainables.measures.fingerprints.compare import compare_pairs

KINDS = ("seeds", "arms", "data")
# Arm factors that change what a tagger learns from rather than how it is built: how much of
# the target data, and which intermediate stages came before the target
DATA_FACTORS = ("data_fraction", "intermediate")
COLUMNS = ["kind", "arm_a", "arm_b", "factor", "unit_a", "unit_b", "measure", "layer", "value"]
KEEP_SETTINGS = (
    "`dynamics: end` (or `each_eval`; the default is end) and `fingerprint: true` (the "
    "default) under `fixed`, with any `fingerprint_max_bytes` large enough for one sentence"
)


@dataclass(frozen=True)
class PlannedPair:
    kind: str
    run_a: str
    run_b: str
    arm_a: str
    arm_b: str
    factor: str
    unit_a: Any
    unit_b: Any


def kept(record: StudyRecord) -> pd.DataFrame:
    """Completed confirm trials that kept a fingerprint (`fingerprint_bytes` > 0)."""
    done = record.confirm_completed()
    if "fingerprint_bytes" not in done:
        return done.iloc[0:0]
    return done[done["fingerprint_bytes"].fillna(0) > 0]


def require_fingerprints(record: StudyRecord) -> None:
    """One line when the study's confirm trials kept no fingerprint to compare."""
    if kept(record).empty:
        raise UserInputError(
            f"study {record.name} (run {record.run_id}): its confirm trials kept no layer "
            f"fingerprints, so no layers can be compared across trials; a study keeps them "
            f"with {KEEP_SETTINGS}"
        )


def planned(record: StudyRecord) -> list[PlannedPair]:
    """Every pair the three kinds compare, among the trials that kept a fingerprint."""
    rows = kept(record)
    units = dict(zip(rows.run_id, record.units(rows), strict=True))
    by_arm = {arm: dict(zip((units[r] for r in part.run_id), part.run_id, strict=True))
              for arm, part in rows.groupby("arm", sort=False)}  # fmt: skip
    out = []
    for arm, runs in by_arm.items():
        for a, b in itertools.combinations(sorted(runs, key=str), 2):
            out.append(PlannedPair("seeds", runs[a], runs[b], arm, arm, "", a, b))
    for kind, arm_a, arm_b, factor in _arm_pairs(record):
        runs_a, runs_b = by_arm.get(arm_a, {}), by_arm.get(arm_b, {})
        for unit in sorted(runs_a.keys() & runs_b.keys(), key=str):
            out.append(
                PlannedPair(kind, runs_a[unit], runs_b[unit], arm_a, arm_b, factor, unit, unit)
            )
    return out


def _arm_pairs(record: StudyRecord) -> Iterator[tuple[str, str, str, str]]:
    """(kind, arm A, arm B, factor): the study's compared pairs that differ in design, and
    every pair that differs in one data factor only (a baseline may leave those out)."""
    names, factors = list(record.arms), list(record.arms.values())
    tag = record.tags.get("compare_baseline")
    baseline = json.loads(tag) if tag else None
    for a, b, factor in stats.arm_pairs(factors, record.grid, baseline):
        if factor not in DATA_FACTORS:
            yield "arms", names[a], names[b], factor
    for a, b, factor in stats.arm_pairs(factors, record.grid):
        if factor in DATA_FACTORS:
            yield "data", names[a], names[b], factor


_CACHE: dict[tuple, pd.DataFrame] = {}  # the last report's table: its sections share it


def layer_table(record: StudyRecord) -> pd.DataFrame:
    """All planned pairs compared (COLUMNS), from the fingerprints in MLflow."""
    pairs = planned(record)
    key = (record.tracking_uri, record.run_id, tuple(pairs))
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = _compared(record.tracking_uri, pairs)
    return _CACHE[key]


def _compared(tracking_uri: str, pairs: list[PlannedPair]) -> pd.DataFrame:
    # imported here: threadpoolctl sets KMP_DUPLICATE_LIB_OK in the environment when imported,
    # which `from study import load_verdicts` would otherwise leave in a notebook's subprocesses
    from threadpoolctl import threadpool_limits

    runs = sorted({run for p in pairs for run in (p.run_a, p.run_b)})
    with tempfile.TemporaryDirectory(prefix="fingerprints-") as folder:
        prints = read_fingerprints(tracking_uri, runs, Path(folder))
        usable = [p for p in pairs if p.run_a in prints and p.run_b in prints]
        # one BLAS thread: on these 384 x 384 decompositions OpenBLAS's threads cost more
        # than they give (measured 10x slower with 2 threads on a busy 2-core machine)
        with threadpool_limits(1, user_api="blas"):
            values = compare_pairs(prints, [(p.run_a, p.run_b) for p in usable])
    rows = [
        (p.kind, p.arm_a, p.arm_b, p.factor, p.unit_a, p.unit_b, measure, layer, value)
        for p in usable
        for measure, per_layer in values[(p.run_a, p.run_b)].items()
        for layer, value in enumerate(per_layer)
    ]
    table = pd.DataFrame(rows, columns=COLUMNS)
    table.attrs["unreadable"] = sorted(set(runs) - set(prints))
    return table
