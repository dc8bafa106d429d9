"""What a reader asks after the verdicts: how good can a budget get, how often does a run
fail, and could the study be repeated.

- Expected best dev F1 of n runs (Dodge et al. 2019, "Show your work"), with the unbiased
  estimator of Tang et al. 2020: the mean over all n-subsets of the observed runs of their
  maximum, computed only where the draws are i.i.d. (an arm's confirm seeds: one configuration,
  different seeds), against n and against trial-hours.
- Degenerate runs (diverged, or dev F1 at the all-O level: no entity predicted) per arm, beside
  the mean over all seeds, so a mean pulled down by a few dead runs is visible as such.
- An ACL-style reproducibility block from what the study run recorded in MLflow.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.special import gammaln  # noqa: E402

from study.names import PHASES  # noqa: E402
from study.report.data import StudyRecord  # noqa: E402

ALL_O = 1e-9  # entity F1 of a tagger that predicts no entity
# a non-finite loss, as words: a bare "inf" substring would also count "inference" or "info"
DIVERGED = re.compile(r"\b(?:nan|inf|infinity)\b|diverg|non-?finite", re.IGNORECASE)


def expected_max(values: Sequence[float]) -> np.ndarray:
    """E[max of n draws without replacement] for n = 1..N, unbiased: with v sorted ascending,
    sum over i >= n of v_(i) C(i-1, n-1) / C(N, n) (log-gamma for large N)."""
    v = np.sort(np.asarray(values, float))
    big_n = len(v)
    out = np.empty(big_n)
    i = np.arange(1, big_n + 1)
    for n in range(1, big_n + 1):
        use = i >= n
        log_w = _log_comb(i[use] - 1, n - 1) - _log_comb(big_n, n)
        out[n - 1] = float(np.sum(v[use] * np.exp(log_w)))
    return out


def _log_comb(n, k) -> np.ndarray:
    n, k = np.asarray(n, float), np.asarray(k, float)
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def expected_max_table(record: StudyRecord) -> pd.DataFrame:
    """arm, n_trials, trial_hours, expected_best_dev_f1 over each arm's completed confirm
    trials (i.i.d. seeds of one configuration)."""
    rows = []
    done = record.confirm_completed()
    for arm, part in done.groupby("arm", sort=False):
        scores = part["dev_f1"].dropna() if "dev_f1" in part else pd.Series(dtype=float)
        if scores.empty:
            continue
        hours = _mean_hours(part)
        for n, best in enumerate(expected_max(scores.to_numpy()), start=1):
            rows.append((arm, n, n * hours, best))
    return pd.DataFrame(rows, columns=["arm", "n_trials", "trial_hours", "expected_best_dev_f1"])


def _mean_hours(part: pd.DataFrame) -> float:
    if "duration_s" not in part or part["duration_s"].isna().all():
        return math.nan
    return float(part["duration_s"].mean()) / 3600


def plot_expected_max(table: pd.DataFrame, path: Path) -> Path | None:
    """Two panels, one line per arm: against runs and against trial-hours."""
    if table.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for arm, part in table.groupby("arm", sort=False):
        axes[0].plot(part.n_trials, part.expected_best_dev_f1, marker="o", label=arm)
        if part.trial_hours.notna().all():
            axes[1].plot(part.trial_hours, part.expected_best_dev_f1, marker="o", label=arm)
    axes[0].set(xlabel="confirm runs (seeds)", ylabel="expected best dev F1")
    axes[1].set(xlabel="trial-hours")
    axes[0].legend(fontsize=7)
    fig.suptitle("Expected best dev F1 for a budget (unbiased estimator)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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


def reproducibility_block(record: StudyRecord) -> str:
    """Runs per arm and phase, search bounds, selection rule, chosen values, trial-hours,
    hardware and fingerprints, as Markdown."""
    t, plan, tags = record.trials, record.plan, record.tags
    runs = "; ".join(f"`{arm}` {_run_counts(part)}" for arm, part in t.groupby("arm", sort=False))
    hours = t.groupby("arm", sort=False)["duration_s"].sum() / 3600 if "duration_s" in t else None
    lines = [
        f"- Runs per arm: {runs or 'none'}.",
        f"- Search space: {_search_text(plan.get('search') or {})}.",
        f"- Selection rule: {_selection_text(plan)}.",
        f"- Chosen values (confirm): {_chosen_text(record)}.",
        "- Trial-hours per arm: "
        + (
            ", ".join(f"`{a}` {h:.2f}" for a, h in hours.items()) + f"; total {hours.sum():.2f}"
            if hours is not None
            else "not recorded"
        )
        + ".",  # fmt: skip
        f"- Hardware: {tags.get('hardware', 'not recorded')}.",
        f"- Code `{tags.get('code_version', '?')}`, model `{tags.get('model', '?')}` "
        f"(`{tags.get('model_fingerprint', '?')}`), data `{tags.get('data_fingerprint', '?')}`.",
    ]
    return "\n".join(lines)


def _run_counts(part: pd.DataFrame) -> str:
    """'explore 8 (3 pruned), confirm 5 (1 errored)', phases in study order: a reader judging
    the seeds behind a mean needs the runs that did not finish too, not only the total."""
    phases = sorted(set(part.phase), key=lambda p: (PHASES.index(p) if p in PHASES else 9, p))
    out = []
    for phase in phases:
        status = part.status[part.phase == phase]
        others = status[status != "completed"].value_counts().sort_index()
        detail = ", ".join(f"{n} {name}" for name, n in others.items())
        out.append(f"{phase} {len(status)}" + (f" ({detail})" if detail else ""))
    return ", ".join(out)


def _search_text(search: dict) -> str:
    if not search:
        return "nothing searched (fixed settings)"
    parts = []
    for name, dist in search.items():
        if dist.get("type") == "categorical":
            parts.append(f"{name} in {dist.get('choices')}")
        else:
            parts.append(f"{name} ~ {dist.get('type')}[{dist.get('low')}, {dist.get('high')}]")
    return ", ".join(parts)


def _selection_text(plan: dict) -> str:
    phases = plan.get("phases") or {}
    select = (phases.get("confirm") or {}).get("select", "best" if phases.get("explore") else "")
    metric = plan.get("metric") or {}
    if select == "best":
        return (f"each arm's explore sample with the best mean {metric.get('name', 'dev_f1')} "
                f"({metric.get('mode', 'max')}) over its explore seeds, all completed")  # fmt: skip
    return f"fixed samples {select}"


def _value(name: str, value) -> str:
    return f"{name}={value:.4g}" if isinstance(value, float) else f"{name}={value}"


def _chosen_text(record: StudyRecord) -> str:
    done = record.confirm_completed()
    parts = []
    for arm, part in done.groupby("arm", sort=False):
        values = [_value(name, part[name].iloc[0]) for name in record.searched if name in part]
        parts.append(f"`{arm}` " + (", ".join(values) or "(no searched factor)"))
    return "; ".join(parts) or "none"
