"""The report's README.md: what ran, per-arm results, comparisons and what they mean.

Every number comes from the MLflow study run named at the top, so a reader can trace it
back; the summary paragraph is written from the statistics, and says "no significant
difference" when that is the result.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from study import stats
from study.names import DRIVERS_TAG, TRAINABLE_TAG, WALL_TAG
from study.report.provenance import code_text
from study.report.text import markdown_table, num, p_value, stage_sequence
from study.report.validity import budget_note
from trainables.settings import SYNTHETIC

if TYPE_CHECKING:
    from study.report import Report
    from study.tracking.reading import StudyRecord

FIGURES = {
    "lr_vs_f1": "Explore phase: {metric} against learning rate per arm (one point per seed; "
    "hollow = pruned, its value from an earlier evaluation, left out of the line).",
    "learning_curves": "Confirm phase: {metric} learning curves per arm, each evaluation as it "
    "was made: a thin line per seed to its last evaluation, a thick line for the mean over "
    "seeds only as far as every seed evaluated, and a star for the checkpoint each seed kept "
    "for test (its {metric}, at the step it was kept).",
    "heatmap": "Confirm phase: mean test F1 over the two grid factors (a declared baseline "
    "outlined).",
    "seeds": "Confirm phase: every seed per arm and metric; lines join one seed across arms "
    "(across one band's arms where many lie in bands), the black bar is the median.",
    "dynamics": "Confirm phase: how far each layer moved from the pretrained encoder at the "
    "end of training, one panel per measure, mean over seeds; bright = unchanged, the weight "
    "distance on a log scale.",
}


def report_title(record: StudyRecord) -> str:
    """`Study report`, or `Synthetic study report` when the trials trained the synthetic
    surface: such numbers test the machinery and must never pass for a finding."""
    return "Synthetic study report" if is_synthetic(record) else "Study report"


def is_synthetic(record: StudyRecord) -> bool:
    return record.tags.get(TRAINABLE_TAG) == SYNTHETIC


SYNTHETIC_NOTE = (
    "> **Synthetic trainable.** Every number below comes from the response surface in "
    "`trainables/settings/surface.py` (any layer comparison from its stand-in fingerprints, "
    "random arrays), not from training a model: this study tests the machinery and is no "
    "finding."
)


def _header(report: Report) -> str:
    r = report.record
    tags = r.tags
    wall, drivers = tags.get(WALL_TAG), int(tags.get(DRIVERS_TAG, 1))
    lines = [
        f"# {report_title(r)}: `{r.name}` (profile `{tags.get('profile', '?')}`)",
        "",
        f"> {r.plan.get('description', '')}",
        "",
        *([SYNTHETIC_NOTE, ""] if is_synthetic(r) else []),
        f"- MLflow: experiment `{r.name}`, study run `{r.run_id}` "
        f"(state: {tags.get('state', 'unknown')}"
        + (f", wall time {int(wall) // 60} min {int(wall) % 60} s" if wall else "")
        + (f" over {drivers} runs of the driver" if wall and drivers > 1 else "")
        + ")",
        f"- Model `{tags.get('model', '?')}` (fingerprint `{tags.get('model_fingerprint', '?')}`)"
        f", data fingerprint `{tags.get('data_fingerprint', '?')}`"
        f", precision {tags.get('precision', 'not recorded')}"
        f", code {code_text(r)}",
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
    out = ["## What ran", "", markdown_table(["phase", *statuses, "total"], rows)]
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
    stages = report.record.stages  # what each arm trained before the target, if any did
    header = ["arm", *(["stages"] if stages else []), *searched, "n", *(m for m in metrics)]
    rows = []
    for row in table.to_dict("records"):
        shown = [stage_sequence(stages.get(row["arm"], []))] if stages else []
        cells = [f"`{row['arm']}`", *shown, *(row[s] for s in searched), str(row["n_seeds"])]
        cells += [_mean_std(row, m) for m in metrics]
        rows.append(cells)
    intro = (
        "## Per-arm results (confirm phase)\n\nMean ± standard deviation over seeds of the "
        "completed confirm trials. F1 is entity-level, conlleval mode (the metric of record); "
        "`curve_area` is the mean dev F1 over evaluations (higher = learns earlier); "
        "`steps_to_95` is the first optimizer step reaching 95% of the final dev F1 (lower = "
        "faster)."
        + (
            " `stages`: what the arm trained, in order; the target's metrics are its own "
            "(its steps counted from its start)."
            if stages
            else ""
        )
        + (
            f" The searched factor(s) {', '.join(searched)} show the value confirm ran, chosen "
            "as the best explore sample of the arm."
            if searched
            else ""
        )  # fmt: skip
    )
    return intro + "\n\n" + markdown_table(header, rows)


def _mean_std(row: dict, metric: str) -> str:
    mean, std, n = row[f"{metric}_mean"], row[f"{metric}_std"], row[f"{metric}_n"]
    if n == 0:
        return "n/a"
    text = num(mean) + ("" if math.isnan(std) else f" ± {num(std)}")
    return text + (f" (n={n})" if n != row["n_seeds"] else "")


def _analysis_section(report: Report) -> str:
    """The declared analysis and the seeds, first: what the verdicts below may be read as."""
    a = report.record.analysis
    rounds = (
        f"the confirm phase ran in rounds, seeds after each look {list(a.looks)}, alpha spent "
        f"{a.spending.replace('_', '-')} style over the looks and split evenly over the "
        "primary comparisons"
        if a.sequential
        else "one look at all confirm seeds; Holm's correction over the primary comparisons"
    )
    ni = (
        f"non-inferiority one-sided at **{a.ni_level:g}** (declared `ni_alpha`; the convention "
        f"of ICH E9 and CONSORT is α/2 = {a.alpha / 2:g})"
        if a.ni_alpha is not None and a.ni_alpha != a.alpha / 2
        else f"non-inferiority one-sided at α/2 = {a.ni_level:g} (ICH E9, CONSORT)"
    )
    lines = [
        "## Declared analysis",
        "",
        f"Declared in the study file before any trial ran and recorded on the study run: "
        f"primary metric **{a.primary}**, margin **±{a.margin:g}** (in {a.primary} units), "
        f"family-wise **α = {a.alpha:g}**, {ni}; {rounds}. Only the primary metric's comparisons "
        "carry verdicts; every other metric is exploratory (unadjusted p, no verdict).",
        "",
        _seed_line(report),
    ]
    if a.data_seeds > 1:
        lines.append(f"Each seed is crossed with {a.data_seeds} data seeds (data subset and "
                     "order). The seed is the unit of analysis: each arm's score at a seed is "
                     "its mean over the data seeds, so a pair, and a sequential look, counts "
                     "seeds.")  # fmt: skip
    return "\n".join(lines)


def _seed_line(report: Report) -> str:
    t = report.record.trials
    explore = sorted(set(t[t.phase == "explore"].seed))
    confirm = sorted(
        set(report.record.confirm_completed().seed) | set(t[t.phase == "confirm"].seed)
    )
    shared = sorted(set(explore) & set(confirm))
    seeds = f"Explore seeds {explore or 'none'}; confirm seeds {confirm or 'none'}."
    if not shared:
        return seeds + " No seed that chose a configuration also estimates it."
    return (seeds + f" **Confirm reuses explore seeds {shared}** (`reuse_explore_seeds: true`): "
            "those seeds also chose the configuration, so the confirm means of their arms are "
            "biased upward by the selection (winner's curse).")  # fmt: skip


def _primary_section(report: Report) -> str:
    comps = [c for c in report.comparisons if c.primary]
    if not comps:
        return ""
    a = report.record.analysis
    header = ["A vs B", "verdict", "n", "A − B", "interval of the deciding test", "decided by",
              "p", "TOST p", "p A n.-i.", "p B n.-i.", "TOST interval (1 − 2α)",
              "Wilcoxon p (min)", "d_z", "ε_min", "P(A beats B)", "power at margin",
              "seeds for 80% (sd's 80% interval)"]  # fmt: skip
    rows = [[f"`{c.arm_a}` vs `{c.arm_b}`", _verdict_cell(c), str(c.n), num(c.diff),
             c.interval_text(), c.decided_by or "–",
             p_value(_adj(c.p_holm, c.p_t)), p_value(_adj(c.p_equivalence_holm, c.p_equivalence)),
             p_value(_adj(c.p_a_noninferior_holm, c.p_a_noninferior)),
             p_value(_adj(c.p_b_noninferior_holm, c.p_b_noninferior)),
             f"[{num(c.tost_low)}, {num(c.tost_high)}]",
             f"{p_value(c.p_wilcoxon)} ({p_value(c.wilcoxon_min_p)})", num(c.cohens_d, 2),
             f"{c.eps_winner:.2f}", _win(c), num(c.power_at_margin, 2),
             _seeds_needed(c)] for c in comps]  # fmt: skip
    boot = [c for c in comps if not math.isnan(c.boot_low)]
    method = (
        f"Primary metric `{a.primary}`, paired by seed on the confirm phase (A − B per seed). "
        "Verdicts: *A/B better* when the paired t-test rejects a zero difference; *equivalent* "
        f"when two one-sided t-tests (statsmodels' `ttost_paired`) put the difference inside "
        f"±{a.margin:g}; *A (B) non-inferior* when a one-sided t-test rejects that A (B) is worse "
        "by the margin or more; otherwise *inconclusive*, with the seeds that would give 80% "
        "power against a difference of one margin at the observed spread. p, TOST p and the "
        "non-inferiority p are Holm-adjusted over the primary comparisons (at the deciding "
        f"look's nominal level when sequential); non-inferiority is one-sided at {a.ni_level:g}. "
        "Each row shows the interval of the test that decided its verdict, at that test's "
        "level (*decided by*): the two-sided t interval for *better* (it excludes 0), the "
        "1 − 2α TOST interval for *equivalent* (inside ±margin), the one-sided bound for "
        "*non-inferior* (beyond ∓margin on the claimed side), and for *inconclusive* the "
        "two-sided interval at the strictest level of the tests that failed (it holds 0 and, "
        "with a margin, both ±margin). Seeds for 80% power are given at the observed sd and "
        "over its 80% chi-square interval. *Rests on the t-test's normality*: at this n no "
        "exact signed-rank test can reach the level of the deciding test (its smallest "
        "two-sided p is 2/2^n). Wilcoxon's signed-rank p is "
        "shown with the smallest p it can reach with n seeds. ε_min: almost stochastic order "
        f"(deepsig) at confidence 1 − α/k, Bonferroni over the k arm pairs (< {stats.ASO_TAU} = "
        "dominates). P(A beats B): share of seeds where A is better, with its Clopper-Pearson "
        "interval: the chance A wins on a new seed."
    )
    out = ["## Verdicts (primary metric)", "", method, "", markdown_table(header, rows), ""]
    out += [f"- {c.verdict()}{_qualified(report, c)}" for c in comps]
    if boot:
        out += ["", "Percentile bootstrap intervals (shown from "
                f"{stats.BOOTSTRAP_MIN_SEEDS} seeds on):"]  # fmt: skip
        out += [f"- `{c.arm_a}` vs `{c.arm_b}`: [{num(c.boot_low)}, {num(c.boot_high)}]"
                for c in boot]  # fmt: skip
    return "\n".join(out)


def _qualified(report: Report, c: stats.Comparison) -> str:
    """' — **budget-sensitive**: ...' when an arm of the comparison was still improving."""
    note = budget_note(report.record, c.arm_a, c.arm_b)
    if not note:
        return ""
    head, _, numbers = note.partition(": ")
    return f" — **{head}**: {numbers}"


def _verdict_cell(c: stats.Comparison) -> str:
    normality = " (rests on the t-test's normality)" if c.rests_on_normality else ""
    return f"**{c.outcome}**{normality}"


def _seeds_needed(c: stats.Comparison) -> str:
    if not c.seeds_for_margin:
        return "–"
    return f"{c.seeds_for_margin} ({c.seeds_range_text()})"


def _win(c: stats.Comparison) -> str:
    if math.isnan(c.win_rate):
        return "n/a"
    return f"{c.win_rate:.2f} [{c.win_low:.2f}, {c.win_high:.2f}]"


def _adj(adjusted: float, raw: float) -> float:
    return raw if adjusted is None or math.isnan(adjusted) else adjusted


def _exploratory_section(report: Report) -> str:
    comps = [c for c in report.comparisons if not c.primary]
    if not comps:
        return ""
    header = ["A vs B", "metric", "n", "mean A", "mean B", "A − B", "95% t interval",
              "p (t, unadjusted)", "Wilcoxon p (min)", "d_z"]  # fmt: skip
    rows = [[f"`{c.arm_a}` vs `{c.arm_b}`", c.metric, str(c.n), num(c.mean_a), num(c.mean_b),
             num(c.diff), f"[{num(c.ci_low)}, {num(c.ci_high)}]", p_value(c.p_t),
             f"{p_value(c.p_wilcoxon)} ({p_value(c.wilcoxon_min_p)})", num(c.cohens_d, 2)]
            for c in comps]  # fmt: skip
    return (
        "## Exploratory comparisons (not the declared primary metric)\n\nUnadjusted p-values "
        "and intervals, for orientation only: no verdict is drawn from them, and with many "
        "metrics some will look significant by chance. Almost stochastic order (ε_min) is "
        "computed for the primary metric only.\n\n" + markdown_table(header, rows)
    )


def summary(report: Report) -> str:
    """What the data show, in words, from the verdicts alone."""
    primary = [c for c in report.comparisons if c.primary]
    a = report.record.analysis
    lines = ["## What the data show", ""]
    if not primary:
        lines.append(f"No comparison of the primary metric `{a.primary}` could be made.")
    else:
        lines.append(f"Verdicts on the declared primary metric `{a.primary}` (margin "
                     f"±{a.margin:g}, α = {a.alpha:g}):")  # fmt: skip
        lines += [f"- {c.verdict()}{_qualified(report, c)}" for c in primary]
        if any(c.outcome == "inconclusive" for c in primary):
            lines += ["", "*Inconclusive* is not *as good*: neither a difference nor "
                      "equivalence within the margin was shown with these seeds."]  # fmt: skip
    notes = [c for c in report.comparisons if c.note]
    if notes:
        lines.append("")
        lines += [f"- Note ({c.arm_a} vs {c.arm_b}, {c.metric}): {c.note}" for c in notes]
    return "\n".join(lines)


def _slot(report: Report, slot: str) -> list[str]:
    """The texts of the report's sections in one slot, in order, leaving out empty ones."""
    texts = [s.markdown(report.record, report.tables) for s in report.sections if s.slot == slot]
    return [text for text in texts if text]


def followups_section(report: Report) -> str:
    """What a reader asks after the verdicts: one part per follow-up section."""
    parts = _slot(report, "followups")
    return "\n\n".join(["## What a reader asks next", *parts]) if parts else ""


def _extra_sets(report: Report) -> str:
    extra = report.record.extra_sets
    if not extra:
        return ""
    header = ["arm", *(f"{name} F1" for name in extra)]
    rows = [[f"`{row['arm']}`", *(_mean_std(row, f"{n}_f1") for n in extra)]
            for row in report.arm_table.to_dict("records")]  # fmt: skip
    return "## Extra evaluation sets (zero-shot transfer)\n\n" + markdown_table(header, rows)


def _results_sections(report: Report) -> str:
    return "\n\n".join(_slot(report, "results"))


def _verdict_sections(report: Report) -> str:
    return "\n\n".join(_slot(report, "verdicts"))


def _figures(report: Report) -> str:
    out = ["## Plots"]
    captions = dict(FIGURES)
    for section in report.sections:
        captions.update(section.captions)
    for key, caption in captions.items():
        if key in report.figures:
            caption = caption.replace("{metric}", report.record.study_metric[0])
            out += ["", f"**{caption}**", "", f"![{key}]({report.figures[key].name})"]
    return "\n".join(out)


def _files(report: Report) -> str:
    metric = report.record.study_metric[0]
    return (
        "## Files\n\n`trials.csv` (every trial: factors, status, final metrics), `arms.csv` "
        "(the per-arm table), `comparisons.csv` (every statistic of every comparison), "
        f"`learning_curves.csv` ({metric}, the study's metric, at each evaluation of each "
        f"confirm trial, as made; the kept checkpoint's is `{metric}` in `trials.csv`, at "
        "`best_step`), and where "
        "measured `dynamics.csv` (per-layer dynamics of each confirm trial) and the heads "
        "tables."
    )


def render_markdown(report: Report) -> str:
    sections = [
        _header(report), _analysis_section(report), summary(report), _what_ran(report),
        _arm_section(report), _extra_sets(report), _results_sections(report),
        _primary_section(report), _verdict_sections(report), _exploratory_section(report),
        followups_section(report),
        _figures(report), _files(report),
    ]  # fmt: skip
    return "\n\n".join(s for s in sections if s) + "\n"
