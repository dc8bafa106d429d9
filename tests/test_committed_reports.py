"""The committed example reports (reports/<study>/comparisons.csv) keep the rule that
tests/study/stats/test_verdict_intervals.py checks on simulated studies: every primary
verdict's interval lies on the side of -margin / 0 / +margin that its verdict claims."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.study.stats.test_verdict_intervals import claim_holds
from tests.study_helpers import REPO

SHIPPED = ("ner_depth", "ner_intermediate", "ner_reinit")
TABLES = sorted((REPO / "reports").glob("*/comparisons.csv"))


def test_each_shipped_study_has_a_committed_report():
    assert {path.parent.name for path in TABLES} >= set(SHIPPED)


@pytest.mark.parametrize("path", TABLES, ids=lambda path: path.parent.name)
def test_every_primary_verdicts_interval_is_on_its_claimed_side(path):
    table = pd.read_csv(path)
    primary = table[table.primary]
    assert len(primary), f"{path}: no primary comparison"
    for row in primary.itertuples():
        assert claim_holds(row), (path.parent.name, row.arm_a, row.arm_b, row.outcome,
                                  row.decided_low, row.decided_high)  # fmt: skip
