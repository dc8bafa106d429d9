import math
import random
import warnings

import numpy as np
import pytest
from seqeval.scheme import IOB2

from trainables.training.curves import final_gain
from trainables.training.metrics import (
    entity_scores,
    learning_curve_area,
    steps_to_fraction_of_final,
)


def test_perfect_prediction_scores_one():
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    s = entity_scores(gold, gold)
    assert (s.precision, s.recall, s.f1, s.support) == (1.0, 1.0, 1.0, 2)


def test_hand_computed_partial_match():
    # gold: PER(0-1), LOC(3), ORG(5); pred: PER(0) wrong span, LOC(3) right, MISC(5) wrong type
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG"]]
    pred = [["B-PER", "O", "O", "B-LOC", "O", "B-MISC"]]
    s = entity_scores(gold, pred)
    assert s.precision == pytest.approx(1 / 3)
    assert s.recall == pytest.approx(1 / 3)
    assert s.f1 == pytest.approx(1 / 3)
    assert s.per_type["LOC"]["f1"] == 1.0
    assert s.per_type["PER"]["f1"] == 0.0


def test_ill_formed_span_counts_in_conlleval_but_not_strict():
    # An entity starting with I- is accepted by conlleval, rejected by strict IOB2.
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    pred = [["I-PER", "I-PER", "O", "B-LOC"]]
    lenient = entity_scores(gold, pred, mode="conlleval")
    strict = entity_scores(gold, pred, mode="strict")
    assert lenient.f1 == 1.0
    assert strict.precision == 1.0  # only LOC is predicted as a well-formed entity
    assert strict.recall == 0.5
    assert strict.f1 == pytest.approx(2 / 3)


def test_type_switch_inside_entity_differs_between_modes():
    gold = [["B-ORG", "I-ORG", "I-ORG"]]
    pred = [["B-ORG", "I-ORG", "I-PER"]]  # conlleval: ORG(0-1) + PER(2); both wrong spans
    assert entity_scores(gold, pred).f1 == 0.0
    assert entity_scores(gold, pred, mode="strict").f1 == 0.0


def test_no_entities_anywhere_gives_zero_not_nan():
    s = entity_scores([["O", "O"]], [["O", "O"]])
    assert s.f1 == 0.0 and s.support == 0


def test_flat_names_metrics_for_logging():
    s = entity_scores([["B-PER"]], [["B-PER"]])
    assert s.flat("dev") == {
        "dev_precision": 1.0,
        "dev_recall": 1.0,
        "dev_f1": 1.0,
        "dev_f1_PER": 1.0,
    }


def test_length_mismatch_and_bad_mode_are_errors():
    with pytest.raises(ValueError, match="differ"):
        entity_scores([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="not one of"):
        entity_scores([["O"]], [["O"]], mode="loose")


# BIO tags of two types, and for conlleval mode the tags seqeval's default chunker also reads:
# IOBES prefixes, bare prefixes, '.', a type with a '-' in it, a prefix longer than one letter
BIO = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
ODD = [*BIO, "E-PER", "S-LOC", "E-LOC", "S-PER", "B", "I", ".", ".-PER", "I-A-B", "Bx-LOC"]


def _sequences(rng: random.Random, tags: list[str]) -> list[list[str]]:
    return [[rng.choice(tags) for _ in range(rng.randint(0, 7))] for _ in range(rng.randint(1, 5))]


def _seqeval_scores(gold, pred, mode: str) -> dict:
    """seqeval's own report (the scikit-learn-importing path the trainer no longer takes)."""
    from seqeval.metrics import classification_report

    kwargs = {"mode": "strict", "scheme": IOB2} if mode == "strict" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = classification_report(gold, pred, output_dict=True, zero_division=0, **kwargs)
    return {
        name: (float(s["precision"]), float(s["recall"]), float(s["f1-score"]), int(s["support"]))
        for name, s in report.items()
        if name == "micro avg" or not name.endswith(" avg")
    }


@pytest.mark.parametrize(
    ("mode", "tags"), [("conlleval", ODD), ("conlleval", BIO), ("strict", BIO)]
)
def test_scores_equal_seqeval_to_the_last_bit(mode, tags):
    """600 generated pairs of tag sequences per case, mostly ill-formed: every micro and
    per-type precision, recall, F1 and support equals seqeval's `classification_report`."""
    rng = random.Random(f"{mode}{len(tags)}")
    for _ in range(600):
        gold = _sequences(rng, tags)
        pred = [[rng.choice(tags) for _ in s] for s in gold]
        ours = entity_scores(gold, pred, mode=mode)
        table = {
            n: (s["precision"], s["recall"], s["f1"], s["support"])
            for n, s in ours.per_type.items()
        }
        table["micro avg"] = (ours.precision, ours.recall, ours.f1, ours.support)
        assert table == _seqeval_scores(gold, pred, mode), (gold, pred)


def test_learning_curve_area_is_mean_of_history():
    assert learning_curve_area([0.2, 0.4, 0.9]) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        learning_curve_area([])


def test_steps_to_95_percent_of_final():
    steps = [10, 20, 30, 40]
    assert steps_to_fraction_of_final(steps, [0.1, 0.5, 0.86, 0.9]) == 30  # 0.95*0.9 = 0.855
    assert steps_to_fraction_of_final(steps, [0.95, 0.5, 0.6, 0.9]) == 10
    assert steps_to_fraction_of_final(steps, [0.0, 0.0, 0.0, 0.0]) is None


@pytest.mark.parametrize(
    ("history", "mode", "gain"),
    [
        ([0.1, 0.2], "max", 0.1),  # two evaluations: the line through them, last - first
        ([0.1, 0.3, 0.35], "max", 0.05),  # a third of 3 is 1: at least the last 2
        ([0.1, 0.3, 0.35, 0.3, 0.45, 0.5], "max", 0.05),  # the last 2 of 6
        # the last 4 of 10: slope sum((x - 1.5)(y - 0.6)) / 5 = 0.01, rise 3 * 0.01
        ([0.0] * 6 + [0.6, 0.55, 0.65, 0.6], "max", 0.03),
        ([2.0, 1.0, 0.6, 0.55, 0.5, 0.45], "min", 0.05),  # a loss still falling: positive
        ([0.2, 0.5, 0.45, 0.4, 0.42, 0.38], "max", -0.04),  # past its peak: negative
        # a dip and its recovery in the last 3 of 9: the line's rise is last - first, 0
        ([0.1, 0.4, 0.5, 0.5, 0.5, 0.5, 0.5, 0.44, 0.5], "max", 0.0),
        # the last third of 15 is its last 5, rising 0.01 each: the early jump plays no part
        ([0.0] * 5 + [0.6] * 5 + [0.60, 0.61, 0.62, 0.63, 0.64], "max", 0.04),
    ],
)
def test_final_gain_is_the_rise_of_the_line_through_the_last_third(history, mode, gain):
    assert final_gain(history, mode) == pytest.approx(gain)


def _numpy_rise(history: list[float]) -> float:
    """The same rise computed independently: numpy's least-squares line over the window."""
    k = max(2, math.ceil(len(history) / 3))
    slope, _ = np.polyfit(np.arange(k), np.asarray(history[-k:]), 1)
    return float(slope * (k - 1))


def test_a_noisy_flat_curve_gains_little():
    """30 evaluations: a rise, then flat at 0.8 with noise (sd 0.003). The smoothed gain over
    the last 10 is well under the plateau, and equals numpy's least-squares line."""
    rng = np.random.default_rng(3)
    history = list(np.linspace(0.2, 0.8, 10)) + list(0.8 + rng.normal(0, 0.003, 20))
    gain = final_gain(history)
    assert gain == pytest.approx(_numpy_rise(history), abs=1e-12)
    assert abs(gain) < 0.005
    # one last evaluation drawn 0.012 higher moves the rise by 6 (k - 1) / (k (k + 1)) of it,
    # 0.49 at k = 10, where the window's best or its last minus first moves by all of it
    spiked = history[:-1] + [history[-1] + 0.012]
    assert final_gain(spiked) == pytest.approx(_numpy_rise(spiked), abs=1e-12)
    assert final_gain(spiked) - gain == pytest.approx(0.012 * 54 / 110)


def test_a_rising_curve_gains_its_trend_over_the_last_third():
    rng = np.random.default_rng(4)
    history = list(0.3 + 0.004 * np.arange(24) + rng.normal(0, 0.003, 24))
    gain = final_gain(history)
    assert gain == pytest.approx(_numpy_rise(history), abs=1e-12)
    assert gain == pytest.approx(0.004 * 7, abs=0.01) and gain > 0.005  # 8 points, 7 steps
    losses = [1 - v for v in history]  # the same curve as a loss, falling: the same gain
    assert final_gain(losses, "min") == pytest.approx(gain)


def test_final_gain_of_one_evaluation_is_unknown():
    assert math.isnan(final_gain([0.5]))
    assert math.isnan(final_gain([0.5, math.nan, 0.4])) and math.isnan(final_gain([math.nan, 1]))
