"""The report's README.md: what ran, per-arm results, comparisons and what they mean.

Every number comes from the MLflow study run named at the top, so a reader can trace it
back; the summary paragraph is written from the statistics, and says "no significant
difference" when that is the result.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from study import stats

if TYPE_CHECKING:
    from study.report import Report

FIGURES = {
    "lr_vs_f1": "Explore phase: dev F1 against learning rate per arm (one point per seed).",
    "learning_curves": "Confirm phase: dev-F1 learning curves per arm, mean and min-max band "
    "over seeds.",
    "heatmap": "Confirm phase: mean test F1 over the two grid factors.",
    "seeds": "Confirm phase: every seed per arm and metric; lines join one seed across arms.",
    "dynamics": "Confirm phase: how far each layer moved from the pretrained encoder at the "
    "end of training (weight L2, attention JS divergence, CKA, SVCCA), mean over seeds.",
}


def _num(value: float, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}g}" if abs(value) >= 1 else f"{value:.{digits}f}"


def _p(value: float) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _header(report: Report) -> str:
    r = report.record
    tags = r.tags
    wall = tags.get("wall_s")
    lines = [
        f"# Study report: `{r.name}` (profile `{tags.get('profile', '?')}`)",
        "",
        f"> {r.plan.get('description', '')}",
        "",
        f"- MLflow: experiment `{r.name}`, study run `{r.run_id}` "
        f"(state: {tags.get('state', 'unknown')}"
        + (f", wall time {int(wall) // 60} min {int(wall) % 60} s" if wall else "")
        + ")",
        f"- Model `{tags.get('model', '?')}` (fingerprint `{tags.get('model_fingerprint', '?')}`)"
        f", data fingerprint `{tags.get('data_fingerprint', '?')}`"
        f", code `{tags.get('code_version', '?')}`",
        f"- Plan: {tags.get('plan', '?')}",
        f"- Made by `python -m study.report {r.name}` from the tracking store; the CSV files "
        "beside this page hold every number shown here.",
    ]
    return "\n".join(lines)


def _what_ran(report: Report) -> str:
    t = report.record.trials
    counts = t.groupby(["phase", "status"]).size().unstack(fill_value=0)
    statuses = [s for s in ("completed", "pruned", "errored", "running") if s in counts]
    rows = [[phase, *(str(counts.loc[phase, s]) for s in statuses), str(counts.loc[phase].sum())]
            for phase in counts.index]  # fmt: skip
    out = ["## What ran", "", _table(["phase", *statuses, "total"], rows)]
    errored = t[t.status == "errored"]
    if len(errored):
        out += ["", "Errored trials (retried up to `max_failures`, then recorded):", ""]
        out += [f"- {e.phase} {e.arm} sample {e.sample} seed {e.seed}: `{e.error}`"
                for e in errored.itertuples()]  # fmt: skip
    return "\n".join(out)


def _arm_section(report: Report) -> str:
    table = report.arm_table
    metrics = report.record.metrics
    searched = report.record.searched
    header = ["arm", *searched, "n", *(m for m in metrics)]
    rows = []
    for row in table.to_dict("records"):
        cells = [f"`{row['arm']}`", *(row[s] for s in searched), str(row["n_seeds"])]
        cells += [_mean_std(row, m) for m in metrics]
        rows.append(cells)
    intro = (
        "## Per-arm results (confirm phase)\n\nMean ± standard deviation over seeds of the "
        "completed confirm trials. F1 is entity-level, conlleval mode (the metric of record); "
        "`curve_area` is the mean dev F1 over evaluations (higher = learns earlier); "
        "`steps_to_95` is the first optimizer step reaching 95% of the final dev F1 (lower = "
        "faster)."
        + (
            f" The searched factor(s) {', '.join(searched)} show the value confirm ran, chosen "
            "as the best explore sample of the arm."
            if searched
            else ""
        )  # fmt: skip
    )
    return intro + "\n\n" + _table(header, rows)


def _mean_std(row: dict, metric: str) -> str:
    mean, std, n = row[f"{metric}_mean"], row[f"{metric}_std"], row[f"{metric}_n"]
    if n == 0:
        return "n/a"
    text = _num(mean) + ("" if math.isnan(std) else f" ± {_num(std)}")
    return text + (f" (n={n})" if n != row["n_seeds"] else "")


def _comparison_section(report: Report) -> str:
    comps = report.comparisons
    if not comps:
        return "## Comparisons\n\nThe study has fewer than two comparable arms."
    tested = sum(c.n >= 2 for c in comps)
    header = ["A vs B", "metric", "n", "mean A", "mean B", "A − B", "95% CI", "p (t)",
              "p (Wilcoxon)", "Holm p", "d_z", "ε_min", "seeds for 80% power"]  # fmt: skip
    rows = [
        [f"`{c.arm_a}` vs `{c.arm_b}`", c.metric, str(c.n), _num(c.mean_a), _num(c.mean_b),
         _num(c.diff), f"[{_num(c.ci_low)}, {_num(c.ci_high)}]", _p(c.p_t), _p(c.p_wilcoxon),
         _p(c.p_holm), _num(c.cohens_d, 2), f"{c.eps_winner:.2f}",
         str(c.seeds_for_power or "–")]
        for c in comps
    ]  # fmt: skip
    method = (
        "Arms that differ in one factor are compared **paired by seed** on the confirm phase "
        "(A − B per seed). p (t): paired t-test; p (Wilcoxon): signed-rank test (its smallest "
        "two-sided p with n seeds is 2/2^n, 0.0625 for 5); Holm p: the t-test p with Holm's "
        f"correction over all {tested} tested comparisons below; 95% CI: percentile bootstrap "
        "of the mean difference; d_z: mean difference / std of the differences; ε_min: almost "
        "stochastic order (deepsig, Bonferroni-corrected for the number of arm pairs) of the "
        f"arm with the better mean over the other (< {stats.ASO_TAU} = dominates); seeds for "
        "80% power: paired seeds a t-test would need to detect a true effect of this d_z."
    )
    verdicts = "\n".join(f"- {c.verdict()}" for c in comps)
    return f"## Comparisons\n\n{method}\n\n{_table(header, rows)}\n\n{verdicts}"


def summary(report: Report) -> str:
    """What the data show, in words, from the statistics alone."""
    comps = [c for c in report.comparisons if c.n >= 2]
    untested = len(report.comparisons) - len(comps)
    significant = [c for c in comps if c.significant]
    lines = ["## What the data show", ""]
    if not comps:
        lines.append("No comparison could be tested: fewer than two paired seeds per arm pair.")
    elif not significant:
        lines.append(
            f"**No significant difference.** None of the {len(comps)} comparisons is "
            f"significant after Holm correction (α = {stats.ALPHA}). Differences of the "
            "observed sizes would need the seed counts in the power column to be detected."
        )
    else:
        verb = "is" if len(significant) == 1 else "are"
        lines.append(f"{len(significant)} of {len(comps)} comparisons {verb} significant after "
                     f"Holm correction (α = {stats.ALPHA}):")  # fmt: skip
        lines += [f"- {c.verdict()}" for c in significant]
    dominated = [c for c in comps if c.eps_winner < stats.ASO_TAU and not c.significant]
    if dominated:
        lines.append("")
        lines.append("Almost stochastic order points one way without a significant t-test in:")
        lines += [f"- {c.metric}: {'A' if c.a_better else 'B'} = "
                  f"`{c.arm_a if c.a_better else c.arm_b}`, ε_min {c.eps_winner:.2f}"
                  for c in dominated]  # fmt: skip
    notes = [c for c in report.comparisons if c.note]
    if untested or notes:
        lines.append("")
        lines += [f"- Note ({c.arm_a} vs {c.arm_b}, {c.metric}): {c.note}" for c in notes]
    return "\n".join(lines)


def _extra_sets(report: Report) -> str:
    extra = report.record.extra_sets
    if not extra:
        return ""
    header = ["arm", *(f"{name} F1" for name in extra)]
    rows = [[f"`{row['arm']}`", *(_mean_std(row, f"{n}_f1") for n in extra)]
            for row in report.arm_table.to_dict("records")]  # fmt: skip
    return "## Extra evaluation sets (zero-shot transfer)\n\n" + _table(header, rows)


def _heads_section(report: Report) -> str:
    tables = report.tables
    layer, head = tables.get("heads_per_layer_test_f1"), tables.get("heads_per_head_test_f1")
    if layer is None:
        return ""
    out = [
        "## Single heads re-initialised: difference from the baseline (test F1)",
        "",
        "Each row summarises (head arm − no-reinit baseline) at the same seed; per block over "
        "all its heads and seeds, per head over seeds. Negative = the head mattered. The same "
        "tables for dev F1 are in `heads_per_layer_dev_f1.csv` and `heads_per_head_dev_f1.csv`.",
        "",
        _frame_table(layer),
        "",
        _frame_table(head),
    ]
    return "\n".join(out)


def _frame_table(frame) -> str:
    header = [str(c) for c in frame.columns]
    rows = [[_cell(v) for v in row] for row in frame.itertuples(index=False)]
    return _table(header, rows)


def _cell(value) -> str:
    if isinstance(value, float) and not value.is_integer():
        return _num(value)
    return str(int(value)) if isinstance(value, float) else str(value)


def _figures(report: Report) -> str:
    out = ["## Plots"]
    for key, caption in FIGURES.items():
        if key in report.figures:
            out += ["", f"**{caption}**", "", f"![{key}]({report.figures[key].name})"]
    return "\n".join(out)


def _files() -> str:
    return (
        "## Files\n\n`trials.csv` (every trial: factors, status, final metrics), `arms.csv` "
        "(the per-arm table), `comparisons.csv` (every statistic of every comparison), "
        "`learning_curves.csv` (dev F1 at each evaluation of each confirm trial), and where "
        "measured `dynamics.csv` (per-layer dynamics of each confirm trial) and the heads "
        "tables."
    )


def render_markdown(report: Report) -> str:
    sections = [
        _header(report), summary(report), _what_ran(report), _arm_section(report),
        _extra_sets(report), _heads_section(report), _comparison_section(report),
        _figures(report), _files(),
    ]  # fmt: skip
    return "\n\n".join(s for s in sections if s) + "\n"
