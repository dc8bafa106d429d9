"""How much of an arm's seed variance comes from weight initialisation and how much from the
data subset and order (Dodge et al. 2020), when a study crosses the two seeds.

A trial's `seed` draws the head, re-initialised weights and dropout; its `data_seed` the data
subset and order. With every (seed, data seed) combination run once, a two-way crossed
random-effects model y = mu + a_seed + b_data + e splits the variance; its components come
from the ANOVA mean squares (statsmodels) by the method of moments. A negative estimate means
that source is indistinguishable from noise: it is set to 0 and said so.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from statsmodels.formula.api import ols
from statsmodels.stats.anova import anova_lm

from study.report.section import Section, Tables
from study.report.text import frame_table
from study.tracking.reading import StudyRecord

NAME = "variance_split"


def variance_split(frame: pd.DataFrame, value: str = "test_f1") -> dict[str, float | str]:
    """Variance components init / data / residual of `value`, their shares of the total, and
    `clipped` (the components set to 0 from a negative estimate, comma-separated)."""
    data = frame[["seed", "data_seed", value]].dropna()
    seeds, data_seeds = sorted(set(data.seed)), sorted(set(data.data_seed))
    a, b = len(seeds), len(data_seeds)
    if a < 2 or b < 2 or len(data) != a * b or data.duplicated(["seed", "data_seed"]).any():
        raise ValueError(f"{value}: the variance split needs every (seed, data seed) pair "
                         f"exactly once; have {len(data)} rows for {a} x {b}")  # fmt: skip
    data = data.rename(columns={value: "y"}).astype({"seed": str, "data_seed": str})
    table = anova_lm(ols("y ~ C(seed) + C(data_seed)", data=data).fit())
    ms = table["mean_sq"]
    residual = float(ms["Residual"])
    raw = {
        "init": (float(ms["C(seed)"]) - residual) / b,
        "data": (float(ms["C(data_seed)"]) - residual) / a,
        "residual": residual,
    }
    clipped = [k for k, v in raw.items() if v < 0]
    parts = {k: max(0.0, v) for k, v in raw.items()}
    total = sum(parts.values())
    out: dict[str, float | str] = dict(parts)
    out.update({f"{k}_share": (v / total if total else float("nan")) for k, v in parts.items()})
    out["clipped"] = ",".join(clipped)
    return out


def variance_table(record: StudyRecord, metrics: Sequence[str]) -> pd.DataFrame:
    """Per arm and metric over completed confirm trials; empty unless data seeds were crossed."""
    done = record.confirm_completed()
    if "data_seed" not in done or done["data_seed"].nunique() < 2:
        return pd.DataFrame()
    rows = []
    for arm, part in done.groupby("arm", sort=False):
        for metric in dict.fromkeys(metrics):
            if metric not in part:
                continue
            try:
                rows.append({"arm": arm, "metric": metric, **variance_split(part, metric)})
            except ValueError as err:
                rows.append({"arm": arm, "metric": metric, "clipped": str(err)})
    return pd.DataFrame(rows)


def _tables(record: StudyRecord) -> Tables:
    split = variance_table(record, [record.analysis.primary, "dev_f1"])
    return {} if split.empty else {NAME: split}


def _markdown(record: StudyRecord, tables: Tables) -> str:
    if NAME not in tables:
        return ""
    return (
        "Seed variance split into weight initialisation (`seed`) and data subset and order "
        "(`data_seed`), two-way crossed random effects (Dodge et al. 2020):\n\n"
        + frame_table(tables[NAME])
    )


SECTION = Section(name=NAME, slot="followups", order=30, tables=_tables, markdown=_markdown)
