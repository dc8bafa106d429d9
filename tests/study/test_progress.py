"""The study's progress line: counts per phase, the best arm so far, elapsed time and an ETA
from measured trial times; drawn in place on a terminal, logged once a minute elsewhere. The
callback that feeds it from Tune counts only trials that ended. (The real command line's
output is checked in tests/study/test_study_run.py.) Running trials show the epoch their last
evaluation reached of the epochs they train at most, so the line moves before a trial ends."""

from __future__ import annotations

import io
import logging

import pytest
from ray.tune.experiment import Trial

from study.names import STUDY_TAGS
from study.progress.callback import TIME_KEY, ProgressCallback, epoch_reached, epochs_planned
from study.progress.line import CLEAR, StudyProgress, TrialView, running_part
from tests.study_helpers import TrialStandIn
from trainables.settings import TRIAL_CONFIG, TrialConfig


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def view(key, phase="explore", arm="depth=6", sample=0, state="finished", completed=True,
         value=0.5, seconds=100.0, **at) -> TrialView:  # fmt: skip
    return TrialView(key, phase, arm, sample, state, completed, value, seconds, **at)


@pytest.fixture
def clock():
    return Clock()


def progress(clock, **kwargs) -> StudyProgress:
    return StudyProgress({"explore": 8, "confirm": 4}, "dev_f1", "max", clock=clock, **kwargs)


def test_counts_best_arm_elapsed_and_eta(clock):
    line = progress(clock, stream=io.StringIO(), terminal=False)
    line.experiment_started(at_once=2)
    clock.now += 130
    line.update([
        view("a", arm="depth=6", value=0.5), view("b", arm="depth=6", value=0.7),
        view("c", arm="depth=5", sample=1, value=0.65, seconds=60.0),
        view("d", arm="depth=5", sample=1, state="finished", completed=False, value=0.1,
             seconds=20.0),  # pruned: it counts as finished, not towards the best arm
        view("e", state="running", completed=False, seconds=30.0, epoch=1.25,
             epochs_planned=3.0),
        view("f", state="waiting", completed=False, seconds=0.0),
    ])  # fmt: skip
    text = line.line()
    assert text.startswith(
        "explore 4/8 (1 running: epoch 1.2/3) | confirm 0/4 | best depth=5: dev_f1 0.6500"
    )
    # explore trials took 70 s on average: 3 still to start, 40 s left of the running one;
    # confirm runs 4 at the completed trials' mean, 86.7 s: 596.7 s of work, two at a time
    assert text.endswith("| 2m10s, ETA 4m58s")


def test_confirm_decides_the_best_arm_once_it_has_results(clock):
    line = progress(clock, stream=io.StringIO(), terminal=False)
    line.experiment_started(at_once=1)
    line.update([view("a", arm="depth=6", value=0.9)])
    line.experiment_ended()
    line.experiment_started(at_once=1)
    line.update([view("b", phase="confirm", arm="depth=5", value=0.6)])
    assert "explore 1/8 | confirm 1/4 | best depth=5: dev_f1 0.6000" in line.line()


def test_minimised_metric_and_no_eta_before_any_trial_finished(clock):
    line = StudyProgress({"explore": 2}, "dev_loss", "min", clock=clock, terminal=False)
    line.experiment_started(at_once=1)
    line.update([view("a", state="running", completed=False, value=None)])
    assert line.line() == "explore 0/2 (1 running: epoch 0.0) | 0s"  # nothing reported yet
    line.update([view("a", value=0.9), view("b", arm="depth=5", value=0.4)])
    assert "best depth=5: dev_loss 0.4000" in line.line()


def test_phases_done_before_a_restart_count_as_done(clock):
    line = progress(clock, terminal=False)
    line.phase_done("explore")
    assert line.line().startswith("explore 8/8 | confirm 0/4")


def test_a_log_file_gets_a_line_a_minute_and_at_each_phase_end(clock, caplog):
    line = progress(clock, stream=io.StringIO(), terminal=False)
    caplog.set_level(logging.INFO, logger="study.progress")
    line.experiment_started(at_once=1)
    for _ in range(5):  # Tune's loop calls it many times a second
        line.update([view("a", state="running", completed=False)])
        clock.now += 20
    line.experiment_ended()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all(m.startswith("progress: explore ") for m in lines)
    assert not line.stream.getvalue()  # nothing drawn


def test_a_terminal_gets_one_line_rewritten_in_place(clock, caplog):
    screen = Terminal()
    handler = logging.StreamHandler(screen)
    logging.getLogger().addHandler(handler)
    try:
        line = progress(clock, stream=screen)
        line.experiment_started(at_once=1)
        line.update([view("a", state="running", completed=False)])
        clock.now += 0.2
        line.update([view("a")])  # within a second: not drawn again
        clock.now += 1
        line.update([view("a")])
        drawn = screen.getvalue()
        assert drawn.count(CLEAR) == 2 and "\n" not in drawn
        assert drawn.endswith("explore 1/8 | confirm 0/4 | best depth=6: dev_f1 0.5000 | "
                              "1s, ETA 18m20s")  # fmt: skip
        logging.getLogger("study.tracking.callback").warning("trial finished: ...")
        assert screen.getvalue().endswith(CLEAR + "trial finished: ...\n")  # erased first
        line.update([view("a")])  # and drawn again below it
        assert screen.getvalue().endswith("ETA 18m20s")
        line.close()
        assert screen.getvalue().endswith(CLEAR)
    finally:
        logging.getLogger().removeHandler(handler)


class FakeTrial(TrialStandIn):
    """What the callback reads of a Tune trial: its id, status, study tags and last result."""

    def __init__(self, trial_id: str, status: str, result: dict | None = None):
        final = {"dev_f1": 0.5, "final": True, TIME_KEY: 10.0}
        super().__init__(
            trial_id=trial_id,
            status=status,
            config={STUDY_TAGS: {"phase": "explore", "arm": "depth=6", "sample": 0}},
            last_result=final if result is None else result,
        )


def test_trials_stopped_by_ctrl_c_are_not_counted_as_finished(clock):
    """Tune's clean-up after Ctrl-C marks the running trials TERMINATED without reporting
    them complete; they run again on --resume. A restored experiment's trials that were
    already finished, and trials Tune reports complete or failed, count."""
    line = progress(clock, terminal=False)
    callback = ProgressCallback(line, every_s=0.0)
    restored = FakeTrial("restored", Trial.TERMINATED)
    done, failed, cut = (FakeTrial(name, Trial.RUNNING) for name in ("done", "failed", "cut"))
    trials = [restored, done, failed, cut]
    line.experiment_started(at_once=2)
    callback.on_step_end(0, trials)
    done.status, failed.status = Trial.TERMINATED, Trial.ERROR
    callback.on_trial_complete(1, trials, done)
    callback.on_trial_error(2, trials, failed)
    cut.status = Trial.TERMINATED  # what Tune's clean-up does, with no event
    unseen = FakeTrial("unseen", Trial.TERMINATED)  # started, then cut, between two updates
    trials.append(unseen)
    callback.on_experiment_end(trials)
    line.experiment_ended()
    assert line.line().startswith("explore 3/8 | confirm 0/4"), line.line()


def test_running_trials_show_the_epoch_of_their_last_evaluation():
    """What moves while no trial has ended: each running trial's epoch of its bound, a trial
    in an intermediate stage its stage, and past four trials a count."""
    running = [
        view("a", state="running", epoch=3.1, epochs_planned=8.0),
        view("b", state="running", epoch=2.44, epochs_planned=2.97),
        view("c", state="running", epoch=0.5, stage=0),
        view("d", state="running"),  # yet to report
    ]
    assert running_part(running) == "4 running: epoch 3.1/8, 2.4/2.97, 0.5 in stage 0, 0.0"
    more = running + [view(k, state="running", epoch=1.0) for k in "ef"]
    assert running_part(more) == ("6 running: epoch 3.1/8, 2.4/2.97, 0.5 in stage 0, 0.0, +2 more")


def test_the_line_moves_as_a_running_trial_reports(clock):
    """Intermediate results of running trials, through the callback, change the line before
    any trial ends (the study's first minutes used to read `explore 0/12 (2 running)`)."""
    line = StudyProgress({"explore": 12}, "dev_f1", "max", clock=clock, terminal=False)
    callback = ProgressCallback(line, every_s=0.0)
    trials = [FakeTrial(name, Trial.RUNNING, result={}) for name in ("a", "b")]
    for trial in trials:
        trial.config[TRIAL_CONFIG] = {"epochs": 8, "lr": 1e-4}
    line.experiment_started(at_once=2)
    callback.on_step_end(0, trials)
    assert line.line().startswith("explore 0/12 (2 running: epoch 0.0, 0.0) |")
    trials[0].last_result = {"step": 310, "epoch": 3.1, "dev_f1": 0.3, TIME_KEY: 60.0}
    trials[1].last_result = {"step": 240, "epoch": 2.4, "dev_f1": 0.2, TIME_KEY: 50.0}
    callback.on_step_end(1, trials)
    assert line.line().startswith("explore 0/12 (2 running: epoch 3.1/8, 2.4/8) |"), line.line()


def _settings(**values) -> TrialConfig:
    return TrialConfig.from_dict({"lr": 1e-4, **values})


@pytest.mark.parametrize(
    "values, planned",
    [
        ({"epochs": 8}, 8.0),  # epochs
        ({"epochs": 8, "max_steps": 250}, 2.5),  # capped by max_steps
        ({"budget": {"steps": 630}}, 6.3),  # a step budget, in this trial's epochs
        ({"budget": {"until_plateau": {"patience": 2, "max_epochs": 12}}}, 12.0),
    ],
)
def test_a_trials_epoch_bound_is_the_steps_it_trains_at_most(values, planned):
    result = {"step": 150, "epoch": 1.5}  # 100 batches an epoch
    assert epochs_planned(_settings(**values), result) == pytest.approx(planned)
    assert epoch_reached(_settings(**values), result) == (1.5, None)


def test_a_staged_trial_shows_its_stage_and_no_bound():
    stage = {"name": "spans", "data": {"embedded": "wnut16", "untyped": True}, "epochs": 1}
    settings = _settings(intermediate=[stage])
    in_stage = {"stage": 0.0, "step": 40, "stage0_epoch": 0.4}
    assert epoch_reached(settings, in_stage) == (0.4, 0)
    target = {"step": 140, "epoch": 0.5}  # its step counts the stage's steps too
    assert epoch_reached(settings, target) == (0.5, None)
    assert epochs_planned(settings, target) is None
    assert epochs_planned(_settings(epochs=3), {}) is None  # before its first evaluation


def test_a_narrow_terminal_keeps_the_elapsed_time_and_eta(clock):
    """Cut to the terminal's width, the line drops the running trials' epochs, then cuts the
    best arm's text, never the elapsed time and ETA at its end."""
    line = progress(clock, stream=io.StringIO(), terminal=False)
    line.experiment_started(at_once=2)
    clock.now += 130
    arm = "depth=full,data_fraction=0.05,reinit_from=4,max_length=128"
    line.update([view("a", arm=arm, value=0.7),
                 view("e", state="running", completed=False, seconds=30.0, epoch=1.25,
                      epochs_planned=3.0)])  # fmt: skip
    whole = line.line()
    assert "(1 running: epoch 1.2/3)" in whole and f"best {arm}: dev_f1 0.7000" in whole
    assert line.line(len(whole)) == whole
    tail = whole[whole.rindex(" | ") :]
    assert tail.startswith(" | 2m10s, ETA ")
    for width in (100, 80, 60, 40):
        text = line.line(width)
        assert len(text) <= width and text.endswith(tail), (width, text)
    assert "(1 running) |" in line.line(100) and "…" in line.line(80)
    assert "best" not in line.line(60)
