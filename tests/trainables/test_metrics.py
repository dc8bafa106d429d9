import math

import pytest

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
        ([0.1, 0.2], "max", 0.1),  # two evaluations: the last against the first
        ([0.1, 0.3, 0.35], "max", 0.25),  # a third of 3 is 1: at least the last 2
        ([0.0, 0.1, 0.2, 0.4, 0.5, 0.5], "max", 0.1),  # the last 2 of 6 hold a new best
        ([0.0, 0.1, 0.2, 0.3, 0.5, 0.6, 0.6, 0.7, 0.9], "max", 0.3),  # the last 3 of 9
        ([1.0, 0.8, 0.5, 0.45], "min", 0.35),  # a loss still falling: positive
        ([0.2, 0.5, 0.4, 0.3], "max", -0.1),  # a run past its peak: negative, converged
        # a dip and its recovery, no new best: converged (last - first of the window: 0.06)
        ([0.1, 0.4, 0.5, 0.5, 0.44, 0.5], "max", 0.0),
    ],
)
def test_final_gain_is_the_best_of_the_last_third_against_the_best_before(history, mode, gain):
    assert final_gain(history, mode) == pytest.approx(gain)


def test_final_gain_of_one_evaluation_is_unknown():
    assert math.isnan(final_gain([0.5]))
    assert math.isnan(final_gain([0.5, math.nan, 0.4])) and math.isnan(final_gain([math.nan, 1]))
