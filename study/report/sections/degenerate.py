"""How often does a run fail: per arm, the confirm runs that diverged or ended at the all-O
level (no entity predicted), beside the mean over all seeds and over the healthy ones, so a
mean pulled down by a few dead runs is visible as such."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from study.report.section import Section, Tables
from study.report.text import frame_table
from study.tracking.reading import StudyRecord

NAME = "degenerate"
ALL_O = 1e-9  # entity F1 of a tagger that predicts no entity
# a non-finite loss, as words: a bare "inf" substring would also count "inference" or "info"
DIVERGED = re.compile(r"\b(?:nan|inf|infinity)\b|diverg|non-?finite", re.IGNORECASE)


def degenerate_table(record: StudyRecord) -> pd.DataFrame:
    """Per arm over all confirm trials: how many diverged or ended at the all-O level, and
    the mean dev/test F1 over every completed seed beside the mean over the healthy ones."""
    t = record.trials
    confirm = t[(t.phase == "confirm") | t.index.isin(record.confirm_completed().index)]
    rows = []
    for arm, part in confirm.groupby("arm", sort=False):
        dead = _degenerate(part)
        done = part[part.status == "completed"]
        healthy = done[~dead.loc[done.index]]
        row = {"arm": arm, "n": len(part), "n_degenerate": int(dead.sum()),
               "rate": float(dead.mean()) if len(part) else math.nan}  # fmt: skip
        for metric in ("dev_f1", "test_f1"):
            if metric in done:
                row[f"{metric}_mean_all"] = done[metric].mean()
                row[f"{metric}_mean_healthy"] = healthy[metric].mean()
        rows.append(row)
    return pd.DataFrame(rows)


def _degenerate(part: pd.DataFrame) -> pd.Series:
    errors = part.get("error", pd.Series("", index=part.index)).fillna("").astype(str)
    diverged = (part.status == "errored") & errors.str.contains(DIVERGED)
    all_o = (part.status == "completed") & (part.get("dev_f1", np.nan) <= ALL_O)
    return diverged | all_o


def _markdown(record: StudyRecord, tables: Tables) -> str:
    if tables[NAME].empty:
        return ""
    return (
        "Degenerate runs (diverged, or dev F1 at the all-O level, i.e. no entity predicted) "
        "beside the mean over all seeds:\n\n" + frame_table(tables[NAME])
    )


SECTION = Section(
    name=NAME,
    slot="followups",
    order=20,
    tables=lambda record: {NAME: degenerate_table(record)},
    markdown=_markdown,
)
