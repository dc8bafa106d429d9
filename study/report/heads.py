"""Per-layer and per-head summaries of a one-head-at-a-time study (`ner_heads`).

With dozens of head arms, a reader wants the shape of the effect more than each comparison:
the distribution of (head arm − no-reinit baseline), paired by seed, summarised per block
and per head (count, mean, std, quartiles), as the head-reinitialisation literature prints it.
"""

from __future__ import annotations

import pandas as pd

from study.report.data import StudyRecord

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
