"""Could the study be repeated: an ACL-style reproducibility block (runs per arm, search
bounds, selection rule, chosen values, trial-hours, hardware, precision, code/model/data
fingerprints),
written from what the study run recorded in MLflow."""

from __future__ import annotations

import pandas as pd

from study.names import PHASES
from study.report.provenance import code_text
from study.report.section import Section, Tables
from study.tracking.reading import StudyRecord


def reproducibility_block(record: StudyRecord) -> str:
    """Runs per arm and phase, search bounds, selection rule, chosen values, trial-hours,
    hardware, precision and fingerprints, as Markdown."""
    t, plan, tags = record.trials, record.plan, record.tags
    runs = "; ".join(f"`{arm}` {_run_counts(part)}" for arm, part in t.groupby("arm", sort=False))
    hours = t.groupby("arm", sort=False)["duration_s"].sum() / 3600 if "duration_s" in t else None
    lines = [
        f"- Runs per arm: {runs or 'none'}.",
        f"- Search space: {_search_text(plan.get('search') or {})}.",
        f"- Selection rule: {_selection_text(plan)}.",
        f"- Chosen values (confirm): {_chosen_text(record)}.",
        *([f"- Budget: {budget}."] if (budget := _budget_text(record)) else []),
        "- Trial-hours per arm: "
        + (
            ", ".join(f"`{a}` {h:.2f}" for a, h in hours.items()) + f"; total {hours.sum():.2f}"
            if hours is not None
            else "not recorded"
        )
        + ".",  # fmt: skip
        f"- Hardware: {tags.get('hardware', 'not recorded')}.",
        f"- Precision of every trial: {_precision_text(tags.get('precision'))}.",
        f"- Code {code_text(record)}, model `{tags.get('model', '?')}` "
        f"(`{tags.get('model_fingerprint', '?')}`), data `{tags.get('data_fingerprint', '?')}`.",
    ]
    return "\n".join(lines)


def _precision_text(precision: str | None) -> str:
    if precision is None:
        return "not recorded"
    if precision == "bf16":
        return "bf16 (autocast; master weights and AdamW state fp32)"
    return precision


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
    if select == "model":
        return (f"each arm's value at the peak of a curve of {metric.get('name', 'dev_f1')} in "
                "the log of the searched factor, fitted through every finished explore trial, "
                "its curvature shared by the arms (the best explore sample where it has no "
                "peak)")  # fmt: skip
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


def _budget_text(record: StudyRecord) -> str:
    """Each arm's training budget (`budget`, e.g. {steps: 600}), once when all arms share it;
    '' when no trial set one."""
    done = record.confirm_completed()
    if "budget" not in done or done.budget.isna().all():
        return ""
    per_arm = {arm: str(part.budget.iloc[0]) for arm, part in done.groupby("arm", sort=False)}
    if len(set(per_arm.values())) == 1:
        return f"{next(iter(per_arm.values()))} for every arm"
    return "; ".join(f"`{arm}` {value}" for arm, value in per_arm.items())


def _markdown(record: StudyRecord, tables: Tables) -> str:
    return "### Reproducibility\n\n" + reproducibility_block(record)


SECTION = Section(
    name="reproducibility", slot="followups", order=90, tables=lambda record: {}, markdown=_markdown
)
