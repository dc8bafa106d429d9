"""What a trial reports at every evaluation, by trainable: the names a study's `metric` may
take. Tune, the explore phase's search, ASHA and `until_plateau` read the study metric from
every result, so a name missing from one fails the whole study at its first report; the
driver refuses it before any trial runs (study/spec/build.py).

Each evaluated set's scores are `<set>_<score>`: `dev` at every evaluation, and every extra
set of `data.extra` too under `eval_extra_each_time`. The tagger's `Trial.score` and the
synthetic trial's `_evaluate` report these names, which tests/trainables/settings/test_reported.py
checks against a real evaluation of each. The last result holds more (test scores, per-type
F1, the curve's summaries), but only there: a study metric cannot be one of them. Nor can the
test scores a trial under `eval_test_each_time` reports at every evaluation (`eval_test_f1`,
...): they record the curve for benchmarks, and test must never select.
"""

from __future__ import annotations

from collections.abc import Iterable

from trainables.settings.surface import SYNTHETIC, TAGGER

# the scores of one evaluated set, by trainable: micro entity F1 (seqeval's conlleval mode),
# its precision and recall, strict-mode F1 and the mean loss per labelled token; the
# synthetic surface's F1 and 1 - F1
SET_SCORES = {
    TAGGER: ("f1", "precision", "recall", "f1_strict", "loss"),
    SYNTHETIC: ("f1", "loss"),
}
TRAINING = ("train_loss",)  # the mean training loss since the last evaluation
DEV = "dev"
# the test set scored at every evaluation under `eval_test_each_time`: its own prefix, so the
# final `test_<score>` (the kept weights') keeps one meaning, and no study metric can name it
EACH_TIME_TEST = "eval_test"


def set_scores(trainable: str, name: str) -> tuple[str, ...]:
    """What one evaluation reports of the set `name` (`dev`, or an extra set)."""
    return tuple(f"{name}_{score}" for score in SET_SCORES[_kind(trainable)])


def each_time_test_name(name: str) -> str:
    """What a final test metric (`test_f1`) is called when scored at every evaluation
    (`eval_test_f1`), so a reader of the curve finds it from the primary metric's name."""
    return f"{EACH_TIME_TEST}_{name.removeprefix('test_')}"


def evaluation_metrics(trainable: str, every_time_sets: Iterable[str] = ()) -> tuple[str, ...]:
    """The metrics every evaluation of a `trainable` trial reports (`tagger`, or a synthetic
    setting: the `synthetic` name or its `{synthetic: {...}}` mapping): the dev set's scores,
    those of `every_time_sets` (the extra sets under `eval_extra_each_time`; the synthetic
    trial reads no data) and the training loss."""
    extra = () if _kind(trainable) == SYNTHETIC else tuple(every_time_sets)
    sets = [DEV, *(name for name in extra if name != DEV)]
    return tuple(m for name in sets for m in set_scores(trainable, name)) + TRAINING


def _kind(trainable: str | dict) -> str:
    return SYNTHETIC if trainable == SYNTHETIC or isinstance(trainable, dict) else TAGGER
