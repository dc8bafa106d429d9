"""Entity-level scores, and the convergence summaries the depth study is about (defined in
`trainables.training.curves`, which needs no seqeval, and importable from here).

`conlleval` mode (seqeval's default, lenient about ill-formed spans such as an entity that
starts with I-) is the metric of record so numbers compare with the literature; `strict`
mode (IOB2, an entity must start with B-) is reported beside it because a tagger whose last
block was removed may produce more ill-formed spans, and that difference is a finding.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from seqeval.metrics import classification_report
from seqeval.scheme import IOB2

from trainables.training.curves import learning_curve_area, steps_to_fraction_of_final

__all__ = [
    "EntityScores", "MODES", "entity_scores", "learning_curve_area", "steps_to_fraction_of_final",
]  # fmt: skip

MODES = ("conlleval", "strict")
# Results that measure time, not learning: two runs of one seed agree on every other result,
# bit for bit on CPU, but not on these (a stage's carry the stage's prefix in front)
WALL_CLOCK_METRICS = ("train_tokens_per_s", "dynamics_s", "fingerprint_s")


def is_wall_clock(key: str) -> bool:
    return key.endswith(WALL_CLOCK_METRICS)


@dataclass(frozen=True)
class EntityScores:
    precision: float
    recall: float
    f1: float
    support: int
    per_type: dict[str, dict[str, float]] = field(default_factory=dict)

    def flat(self, prefix: str) -> dict[str, float]:
        """Metric names as logged: `dev_f1`, `dev_precision`, `dev_f1_PER`, ..."""
        out = {
            f"{prefix}_precision": self.precision,
            f"{prefix}_recall": self.recall,
            f"{prefix}_f1": self.f1,
        }
        out.update({f"{prefix}_f1_{t}": s["f1"] for t, s in self.per_type.items()})
        return out


def entity_scores(
    gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]], mode: str = "conlleval"
) -> EntityScores:
    """Micro-averaged entity precision/recall/F1 at word level, plus per-type scores."""
    if mode not in MODES:
        raise ValueError(f"metric mode {mode!r} is not one of {MODES}")
    if len(gold) != len(pred) or any(len(g) != len(p) for g, p in zip(gold, pred, strict=True)):
        raise ValueError("gold and predicted tag sequences differ in number or length")
    kwargs = {"mode": "strict", "scheme": IOB2} if mode == "strict" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns on empty classes; zero_division covers it
        report = classification_report(
            [list(s) for s in gold],
            [list(s) for s in pred],
            output_dict=True,
            zero_division=0,
            **kwargs,
        )
    micro = report["micro avg"]
    per_type = {
        name: {
            "precision": float(s["precision"]),
            "recall": float(s["recall"]),
            "f1": float(s["f1-score"]),
            "support": int(s["support"]),
        }
        for name, s in report.items()
        if not name.endswith(" avg")
    }
    return EntityScores(
        precision=float(micro["precision"]),
        recall=float(micro["recall"]),
        f1=float(micro["f1-score"]),
        support=int(micro["support"]),
        per_type=per_type,
    )
