"""Entity-level scores, and the convergence summaries the depth study is about (defined in
`trainables.training.curves`, which needs no seqeval, and importable from here).

`conlleval` mode (seqeval's default, lenient about ill-formed spans such as an entity that
starts with I-) is the metric of record so numbers compare with the literature; `strict`
mode (IOB2, an entity must start with B-) is reported beside it because a tagger whose last
block was removed may produce more ill-formed spans, and that difference is a finding.

Both read spans without `seqeval.metrics`, which imports scikit-learn (and with it SciPy's
statistics) for one warning class: seconds of every trial worker's start. The strict spans
are seqeval's own (`seqeval.scheme.Entities`, its light module); the conlleval spans are
`conlleval_spans`, the chunking rule of conlleval.pl as seqeval's default mode states it.
tests/trainables/training/test_metrics.py checks both modes' scores against seqeval's
`classification_report`, bit for bit, on generated tag sequences.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from seqeval.scheme import IOB2, Entities

from trainables.training.curves import learning_curve_area, steps_to_fraction_of_final

__all__ = [
    "EntityScores", "MODES", "conlleval_spans", "entity_scores", "learning_curve_area",
    "steps_to_fraction_of_final",
]  # fmt: skip

MODES = ("conlleval", "strict")
# Results that measure time, not learning: two runs of one seed agree on every other result,
# bit for bit on CPU, but not on these (a stage's carry the stage's prefix in front)
WALL_CLOCK_METRICS = ("train_tokens_per_s", "dynamics_s", "fingerprint_s")

Spans = dict[str, set[Hashable]]  # entity type -> its spans


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
    """Micro-averaged entity precision/recall/F1 at word level, plus per-type scores; a score
    whose denominator is 0 is 0."""
    if mode not in MODES:
        raise ValueError(f"metric mode {mode!r} is not one of {MODES}")
    if len(gold) != len(pred) or any(len(g) != len(p) for g, p in zip(gold, pred, strict=True)):
        raise ValueError("gold and predicted tag sequences differ in number or length")
    spans = conlleval_spans if mode == "conlleval" else _strict_spans
    true, predicted = spans(gold), spans(pred)
    per_type = {
        name: _scores(true.get(name, set()), predicted.get(name, set()))
        for name in sorted(true.keys() | predicted.keys())
    }
    counts = [sum(s[k] for s in per_type.values()) for k in ("hits", "predicted", "support")]
    micro = _prf(*counts)
    return EntityScores(
        precision=micro["precision"],
        recall=micro["recall"],
        f1=micro["f1"],
        support=counts[2],
        per_type={
            name: {k: s[k] for k in ("precision", "recall", "f1", "support")}
            for name, s in per_type.items()
        },
    )


def _scores(true: set[Hashable], predicted: set[Hashable]) -> dict[str, float]:
    hits, n_predicted, support = len(true & predicted), len(predicted), len(true)
    out = _prf(hits, n_predicted, support)
    return {**out, "support": support, "hits": hits, "predicted": n_predicted}


def _prf(hits: int, predicted: int, support: int) -> dict[str, float]:
    """Precision, recall and F1 computed as seqeval computes them (so equal to the last bit)."""
    precision = hits / predicted if predicted else 0.0
    recall = hits / support if support else 0.0
    total = precision + recall
    return {
        "precision": precision,
        "recall": recall,
        "f1": 2.0 * precision * recall / total if total else 0.0,
    }


def _strict_spans(sequences: Sequence[Sequence[str]]) -> Spans:
    """IOB2 entities as seqeval's strict mode reads them: an entity starts with B-."""
    entities = Entities([list(s) for s in sequences], IOB2)
    return {name: entities.filter(name) for name in entities.unique_tags}


def conlleval_spans(sequences: Sequence[Sequence[str]]) -> Spans:
    """Entity spans as conlleval.pl reads them, and seqeval's default mode with it: the
    sentences run together with an O after each, and a chunk ends or starts where the tag's
    prefix (its first character) or its type (after the first '-') changes as
    `_chunk_ends`/`_chunk_starts` say; an I- after O, or after another type, starts one.
    Spans are (first, last) positions in the joined sequence."""
    spans: Spans = defaultdict(set)
    joined = [label for sentence in sequences for label in (*sentence, "O")]
    prev_tag, prev_type, begin = "O", "", 0
    for i, label in enumerate([*joined, "O"]):
        tag, kind = label[0], label[1:].split("-", maxsplit=1)[-1] or "_"
        if _chunk_ends(prev_tag, tag, prev_type, kind):
            spans[prev_type].add((begin, i - 1))
        if _chunk_starts(prev_tag, tag, prev_type, kind):
            begin = i
        prev_tag, prev_type = tag, kind
    return dict(spans)


def _chunk_ends(prev_tag: str, tag: str, prev_type: str, kind: str) -> bool:
    return (
        prev_tag in ("E", "S")
        or (prev_tag in ("B", "I") and tag in ("B", "S", "O"))
        or (prev_tag not in ("O", ".") and prev_type != kind)
    )


def _chunk_starts(prev_tag: str, tag: str, prev_type: str, kind: str) -> bool:
    return (
        tag in ("B", "S")
        or (prev_tag in ("E", "S", "O") and tag in ("E", "I"))
        or (tag not in ("O", ".") and prev_type != kind)
    )
