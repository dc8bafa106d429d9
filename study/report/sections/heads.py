"""Per-layer and per-head summaries of a one-head-at-a-time study (`ner_heads`).

With dozens of head arms, a reader wants the shape of the effect more than each comparison:
the distribution of (head arm − no-reinit baseline), paired by seed, summarised per block
and per head (count, mean, std, quartiles), as the head-reinitialisation literature prints it.
"""

from __future__ import annotations

import pandas as pd

from study.report.section import Section, Tables
from study.report.text import frame_table
from study.tracking.reading import StudyRecord

SUMMARY = ["count", "mean", "std", "min", "25%", "50%", "75%", "max"]


def is_heads_study(record: StudyRecord) -> bool:
    heads = [f.get("reinit_heads") for f in record.arms.values()]
    return [] in heads and any(h and len(h) == 1 for h in heads)


def head_differences(record: StudyRecord, metric: str) -> pd.DataFrame:
    """layer, head, seed, diff: each single-head arm minus the baseline arm at the same seed."""
    scores = record.scores()
    base = next(a for a, f in record.arms.items() if f.get("reinit_heads") == [])
    base_scores = scores.get(base, {}).get(metric, {})
    rows = []
    for arm, factors in record.arms.items():
        heads = factors.get("reinit_heads")
        if not heads or len(heads) != 1:
            continue
        (layer, head), values = heads[0], scores.get(arm, {}).get(metric, {})
        rows += [(layer, head, seed, v - base_scores[seed])
                 for seed, v in values.items() if seed in base_scores]  # fmt: skip
    return pd.DataFrame(rows, columns=["layer", "head", "seed", "diff"]).dropna()


def heads_tables(record: StudyRecord, metric: str) -> dict[str, pd.DataFrame]:
    diffs = head_differences(record, metric)
    if diffs.empty:
        return {}
    per_layer = diffs.groupby("layer")["diff"].describe()[SUMMARY].reset_index()
    per_head = diffs.groupby(["layer", "head"])["diff"].describe()[SUMMARY].reset_index()
    return {f"heads_per_layer_{metric}": per_layer, f"heads_per_head_{metric}": per_head}


def _tables(record: StudyRecord) -> Tables:
    if not is_heads_study(record):
        return {}
    return {**heads_tables(record, "test_f1"), **heads_tables(record, "dev_f1")}


def _markdown(record: StudyRecord, tables: Tables) -> str:
    layer, head = tables.get("heads_per_layer_test_f1"), tables.get("heads_per_head_test_f1")
    if layer is None:
        return ""
    return "\n".join([
        "## Single heads re-initialised: difference from the baseline (test F1)",
        "",
        "Each row summarises (head arm − no-reinit baseline) at the same seed; per block over "
        "all its heads and seeds, per head over seeds. Negative = the head mattered. The same "
        "tables for dev F1 are in `heads_per_layer_dev_f1.csv` and `heads_per_head_dev_f1.csv`.",
        "",
        frame_table(layer),
        "",
        frame_table(head),
    ])  # fmt: skip


SECTION = Section(name="heads", slot="results", order=10, tables=_tables, markdown=_markdown)
