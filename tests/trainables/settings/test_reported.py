"""`evaluation_metrics` (trainables/settings/reported.py), the names a study's `metric` is
checked against before any trial runs, is what the trials report: every evaluation of the
tagger and of the synthetic trial holds each of them, the extra sets' under
`eval_extra_each_time` included, and the last result's scores (test, per type) are not in it."""

from __future__ import annotations

from trainables.settings import SYNTHETIC, TAGGER, TrialConfig, evaluation_metrics
from trainables.training.trials import new_trial


def _evaluations(settings: dict) -> list[dict]:
    return list(new_trial(TrialConfig.from_dict(settings)).run())


def test_every_evaluation_of_the_tagger_reports_each_name(trial_settings, tiny_corpus):
    settings = trial_settings | {
        "data": {**tiny_corpus, "extra": {"other": {"conll": tiny_corpus["dev"]}}},
        "eval_extra_each_time": True,
        "epochs": 1,
    }
    names = evaluation_metrics(TAGGER, ["other"])
    assert {"dev_f1", "dev_loss", "other_f1", "train_loss"} <= set(names)
    evaluations = _evaluations(settings)
    assert len(evaluations) >= 2  # one before the last, which reports more
    for metrics in evaluations:
        assert set(names) <= metrics.keys(), set(names) - metrics.keys()
    assert not {"test_f1", "dev_f1_PER"} & set(names)  # only in the last result


def test_every_evaluation_of_the_synthetic_trial_reports_each_name():
    settings = {"trainable": {SYNTHETIC: {"steps_per_epoch": 4}}, "epochs": 2, "eval_every": 2}
    names = evaluation_metrics({SYNTHETIC: {}}, ["ignored: a synthetic trial reads no data"])
    assert names == evaluation_metrics(SYNTHETIC) == ("dev_f1", "dev_loss", "train_loss")
    evaluations = _evaluations(settings)
    assert len(evaluations) == 4
    for metrics in evaluations:
        assert set(names) <= metrics.keys()


def test_an_extra_set_named_dev_is_not_listed_twice():
    names = evaluation_metrics(TAGGER, ["dev", "extra"])
    assert len(names) == len(set(names)) and "extra_f1_strict" in names
