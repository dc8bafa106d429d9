"""Do two runs of one study reach the same findings? Per arm, paired by seed, with the
project's own statistics; then each run's verdicts side by side.

The use that made it: the default `ner_depth` study run once in fp32 and once in bf16 (one
tracking store each). For every arm both runs have, the confirm seeds' scores of run A and run
B are compared paired by seed like any two arms (`study.stats.compare`): an equivalence test
(two one-sided t-tests) within ±margin (one F1 point by default), with the t interval of the
mean per-seed difference. Then the primary verdicts of each run are printed next to each
other: a change of precision that changes no verdict and keeps every arm within the margin has
not changed what the study concludes. Reads MLflow only.

    python bench/same_findings.py --a sqlite:///runs/fp32/mlflow.db \\
        --b sqlite:///runs/bf16/mlflow.db [--study ner_depth] [--margin 0.01]
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from study import stats
from study.analysis import Analysis
from study.tracking.reading import StudyRecord, load_study_record

METRICS = ("test_f1", "dev_f1")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--a", required=True, help="tracking URI of run A (e.g. fp32)")
    parser.add_argument("--b", required=True, help="tracking URI of run B (e.g. bf16)")
    parser.add_argument("--study", default="ner_depth")
    parser.add_argument("--margin", type=float, default=0.01, help="equivalence margin (F1)")
    parser.add_argument("--alpha", type=float, default=0.05)
    return parser.parse_args(argv)


def per_arm(a: StudyRecord, b: StudyRecord, analysis: Analysis) -> list[stats.Comparison]:
    """Run A against run B in every arm both have, per metric, paired by seed. Holm over the
    arms of each metric, as the study does over its primary comparisons."""
    scores_a, scores_b = a.scores(), b.scores()
    arms = [arm for arm in scores_a if arm in scores_b]
    out = []
    for metric in METRICS:
        family = [stats.compare(scores_a[arm].get(metric, {}), scores_b[arm].get(metric, {}),
                                metric=metric, arm_a=f"A {arm}", arm_b=f"B {arm}",
                                analysis=analysis) for arm in arms]  # fmt: skip
        p_values = [c.p_equivalence for c in family]
        adjusted, _ = stats.holm(p_values, analysis.alpha)
        out += [_with_holm(c, p) for c, p in zip(family, adjusted, strict=True)]
    return out


def _with_holm(c: stats.Comparison, p_equivalence_holm: float) -> stats.Comparison:
    return dataclasses.replace(c, p_equivalence_holm=p_equivalence_holm)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    a = load_study_record(args.a, args.study)
    b = load_study_record(args.b, args.study)
    analysis = Analysis(primary="test_f1", margin=args.margin, alpha=args.alpha)
    print(f"A: {args.a} (precision {a.tags.get('precision', 'fp32')}, run {a.run_id})")
    print(f"B: {args.b} (precision {b.tags.get('precision', 'fp32')}, run {b.run_id})")
    print(f"\nper arm, B - A paired by seed; equivalent within ±{args.margin:g} when the "
          f"Holm-adjusted TOST p < {args.alpha:g}")  # fmt: skip
    header = f"{'metric':8} {'arm':34} {'n':>2} {'mean A':>7} {'mean B':>7} {'B - A':>8} "
    print(header + f"{'95% t interval':>20} {'TOST p':>8} {'Holm':>7}  verdict")
    for c in per_arm(a, b, analysis):
        diff, low, high = (0.0 - v for v in (c.diff, c.ci_high, c.ci_low))  # compare: A - B
        verdict = "equivalent" if c.p_equivalence_holm < args.alpha else "not shown equivalent"
        print(f"{c.metric:8} {c.arm_a[2:]:34} {c.n:2d} {c.mean_a:7.4f} {c.mean_b:7.4f} "
              f"{diff:+8.4f} [{low:+.4f}, {high:+.4f}] {c.p_equivalence:8.3g} "
              f"{c.p_equivalence_holm:7.3g}  {verdict}")  # fmt: skip
        seeds = ", ".join(f"{unit}: {b_ - a_:+.4f}" for unit, a_, b_ in _per_seed(a, b, c))
        print(f"{'':8} per seed (B - A): {seeds}")
    print("\nthe study's own primary verdicts, run A | run B")
    verdicts_a, verdicts_b = _verdicts(a), _verdicts(b)
    for pair in dict.fromkeys([*verdicts_a, *verdicts_b]):
        print(f"  {pair}: {verdicts_a.get(pair, '-')} | {verdicts_b.get(pair, '-')}")
    same = verdicts_a == verdicts_b
    print(f"\nsame primary verdicts: {'yes' if same else 'NO'}")
    return 0


def _per_seed(a: StudyRecord, b: StudyRecord, c: stats.Comparison) -> list[tuple]:
    arm, metric = c.arm_a[2:], c.metric
    sa, sb = a.scores()[arm][metric], b.scores()[arm][metric]
    return [(unit, sa[unit], sb[unit]) for unit in c.seeds]


def _verdicts(record: StudyRecord) -> dict[str, str]:
    baseline = record.tags.get("compare_baseline")
    comparisons = stats.compare_arms(
        record.scores(), record.arms, record.grid, [record.analysis.primary],
        json.loads(baseline) if baseline else None, analysis=record.analysis,
    )  # fmt: skip
    return {f"{c.arm_a} vs {c.arm_b} ({c.metric})": c.outcome for c in comparisons if c.primary}


if __name__ == "__main__":
    raise SystemExit(main())
