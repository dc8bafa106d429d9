"""The learning-curve figure shows what happened: each seed's evaluations as they were made,
the checkpoint it kept for test as a marker of its own (not the end of its line), and a mean
over seeds only as far as every seed evaluated. The trials here kept their best evaluation
(`until_plateau`), which was not their last, and stopped after different numbers of
evaluations, as 29 of the 30 trials of reports/ner_depth did."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection

from study.report import plots
from study.report.arm_styles import arm_styles
from study.tracking import curves as reading_curves
from study.tracking.reading import StudyRecord

EVERY = 50  # steps between evaluations
ARMS = {"depth=6": {"depth": 6}, "depth=5": {"depth": 5}}
# per arm and seed: dev F1 at each evaluation as made; the best is never the last, and the
# seeds of an arm stop after different numbers of evaluations (patience ran out)
EVALUATED = {
    ("depth=6", 0): [0.10, 0.40, 0.55, 0.50, 0.49],
    ("depth=6", 1): [0.12, 0.45, 0.52, 0.60, 0.58, 0.57, 0.56],
    ("depth=6", 2): [0.08, 0.38, 0.50, 0.47, 0.46, 0.45],
    ("depth=5", 0): [0.15, 0.50, 0.48, 0.47],
    ("depth=5", 1): [0.11, 0.44, 0.56, 0.53, 0.52, 0.51],
    ("depth=5", 2): [0.14, 0.47, 0.54, 0.58, 0.55, 0.54, 0.53, 0.52],
}


def best_index(values: list[float]) -> int:
    return int(np.argmax(values))


def trial_rows() -> pd.DataFrame:
    """What a trial reports at its end: dev F1 of the kept (best) checkpoint, the step it was
    kept at, and the mean dev F1 over its evaluations as made."""
    rows = []
    for index, ((arm, seed), values) in enumerate(EVALUATED.items()):
        best = best_index(values)
        assert best != len(values) - 1
        rows.append({"run_id": f"run{index}", "arm": arm, "phase": "confirm",
                     "status": "completed", "seed": seed, "sample": 0,
                     "arm_index": list(ARMS).index(arm), "depth": ARMS[arm]["depth"],
                     "dev_f1": values[best], "best_step": float(EVERY * (best + 1)),
                     "curve_area": float(np.mean(values)),
                     "steps_run": float(EVERY * len(values))})  # fmt: skip
    return pd.DataFrame(rows)


def record(tracking_uri: str = "sqlite://", trials: pd.DataFrame | None = None) -> StudyRecord:
    trials = trial_rows() if trials is None else trials
    return StudyRecord("ner_depth", "study", tracking_uri, {}, {}, dict(ARMS), {}, trials)


def evaluated_curves() -> pd.DataFrame:
    """The table `reading_curves.learning_curves` gives: each evaluation as it was made."""
    run_ids = dict(zip(EVALUATED, trial_rows().run_id, strict=True))
    rows = [(arm, seed, EVERY * (e + 1), e, value, run_ids[arm, seed])
            for (arm, seed), values in EVALUATED.items()
            for e, value in enumerate(values)]  # fmt: skip
    return pd.DataFrame(rows, columns=["arm", "seed", "step", "evaluation", "dev_f1", "run_id"])


@pytest.fixture
def drawn(monkeypatch):
    """The figures `save_figure` closes, kept open to be inspected (closed at the end)."""
    kept, close = [], plt.close
    monkeypatch.setattr(plt, "close", kept.append)
    yield kept
    for fig in kept:
        close(fig)


def lines_of(ax, color) -> list:
    return [line for line in ax.get_lines() if line.get_color() == color]


def check_figure(ax, curves: pd.DataFrame, trials: pd.DataFrame) -> None:
    styles = arm_styles(record())  # the looks of every other figure of the report
    colors = {arm: styles[arm].colour for arm in ARMS}
    for arm in ARMS:
        own = curves[curves.arm == arm]
        thin = [line for line in lines_of(ax, colors[arm]) if line.get_linewidth() < 1]
        thick = [line for line in lines_of(ax, colors[arm]) if line.get_linewidth() >= 1]
        # one thin line per seed, its last point the seed's last evaluation, as made
        ends = {(float(line.get_xdata()[-1]), float(line.get_ydata()[-1])) for line in thin}
        last = own.sort_values("evaluation").groupby("seed").last()
        assert ends == set(zip(last.step.astype(float), last.dev_f1, strict=True))
        # the mean: one line, only over the evaluations every seed made, n in its legend entry
        (mean,) = thick
        shortest = min(len(v) for (a, _), v in EVALUATED.items() if a == arm)
        assert list(mean.get_xdata()) == [EVERY * (e + 1) for e in range(shortest)]
        expected = [np.mean([v[e] for (a, _), v in EVALUATED.items() if a == arm])
                    for e in range(shortest)]  # fmt: skip
        assert list(mean.get_ydata()) == pytest.approx(expected)
        assert "n=3 seeds" in mean.get_label()
        # the kept checkpoints: a marker of their own at (best step, reported dev F1), in the
        # arm's colour, each before its seed's last evaluation, not the end of any line
        (stars,) = [c for c in ax.collections if isinstance(c, PathCollection)
                    and np.allclose(c.get_facecolor()[0], colors[arm])]  # fmt: skip
        mine = trials[trials.arm == arm]
        assert sorted(map(tuple, stars.get_offsets().tolist())) == sorted(
            zip(mine.best_step, mine.dev_f1, strict=True)
        )
        assert all(step < EVERY * len(EVALUATED[arm, seed])
                   for step, seed in zip(mine.best_step, mine.seed, strict=True))  # fmt: skip
    legend_texts = {t.get_text() for legend in ax.figure.legends for t in legend.get_texts()}
    assert "checkpoint kept for test (its dev F1)" in legend_texts


def test_the_kept_checkpoint_is_a_marker_apart_and_the_mean_stops_with_the_shortest_seed(
    tmp_path, drawn
):
    curves, rec = evaluated_curves(), record()
    assert plots.learning_curves(curves, rec, tmp_path / "learning_curves.png").is_file()
    (fig,) = drawn
    check_figure(fig.axes[0], curves, rec.trials)


def test_a_trial_that_kept_its_last_weights_has_its_marker_at_its_last_evaluation():
    """Without `best_step` (a fixed budget) the kept weights are the last ones."""
    curves, trials = evaluated_curves(), trial_rows().drop(columns="best_step")
    trials["dev_f1"] = [values[-1] for values in EVALUATED.values()]
    kept = plots.kept_checkpoints(curves, record(trials=trials))
    assert list(kept.step) == [EVERY * len(values) for values in EVALUATED.values()]
    assert list(kept.dev_f1) == trials.dev_f1.tolist()


def log_trials(uri: str, curve_area: bool = True) -> pd.DataFrame:
    """Trials logged to MLflow as the trainable logs them: dev F1 at each evaluation's step,
    except at the last, where the kept checkpoint's re-score stands in its place."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.create_experiment("ner_depth")
    trials = trial_rows()
    run_ids = []
    for trial, values in zip(trials.itertuples(), EVALUATED.values(), strict=True):
        run = client.create_run(experiment).info.run_id
        logged = [*values[:-1], trial.dev_f1]
        final = {"best_step": trial.best_step, "dev_f1": trial.dev_f1}
        if curve_area:
            final["curve_area"] = trial.curve_area
        metrics = [Metric("dev_f1", v, 0, EVERY * (e + 1)) for e, v in enumerate(logged)]
        metrics += [Metric(k, v, 0, EVERY * len(values)) for k, v in final.items()
                    if k != "dev_f1"]  # fmt: skip
        client.log_batch(run, metrics=metrics)
        run_ids.append(run)
    trials["run_id"] = run_ids
    if not curve_area:
        trials = trials.drop(columns="curve_area")
    return trials


def test_the_report_reads_each_evaluation_as_made_from_mlflow_and_draws_it(tmp_path, drawn):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    rec = record(uri, log_trials(uri))
    curves = reading_curves.learning_curves(rec)
    expected = evaluated_curves().drop(columns="run_id")
    pd.testing.assert_frame_equal(curves.drop(columns="run_id"), expected, atol=1e-12)
    plots.learning_curves(curves, rec, tmp_path / "learning_curves.png")
    (fig,) = drawn
    check_figure(fig.axes[0], curves, rec.trials)


def test_without_curve_area_the_kept_rescore_is_left_off_the_curve(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    rec = record(uri, log_trials(uri, curve_area=False))
    curves = reading_curves.learning_curves(rec)
    counts = curves.groupby(["arm", "seed"], sort=False).size()
    assert counts.tolist() == [len(values) - 1 for values in EVALUATED.values()]
    expected = evaluated_curves().groupby(["arm", "seed"], sort=False).head(-1)
    assert curves.dev_f1.tolist() == pytest.approx(expected.dev_f1.tolist())


def test_a_study_that_minimises_its_loss_gets_figures_of_its_loss(tmp_path, drawn):
    """The smoke study selects on dev_loss: its learning curves, lr figure and their axes are of
    dev_loss, lower = better, not of a dev F1 that is 0 everywhere. Its kept weights' re-score
    (at the last step, best_step earlier) is left off each curve: no curve_area restores a
    loss's own last value."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("smoke")
    trials = trial_rows()
    losses = {key: [1.0 - v for v in values] for key, values in EVALUATED.items()}
    run_ids = []
    for values in losses.values():
        run = client.create_run(experiment).info.run_id
        kept = min(values)
        logged = [*values[:-1], kept]  # the last step's value: the kept weights' re-score
        client.log_batch(run, metrics=[Metric("dev_loss", v, 0, EVERY * (e + 1))
                                       for e, v in enumerate(logged)])  # fmt: skip
        run_ids.append(run)
    trials["run_id"] = run_ids
    trials["dev_loss"] = [min(values) for values in losses.values()]
    trials["phase"] = ["explore", "confirm"] * 3
    trials["lr"] = [1e-4, 1e-4, 3e-4, 3e-4, 1e-4, 1e-4]
    plan = {"metric": {"name": "dev_loss", "mode": "min"}, "search": {"lr": {}}}
    rec = StudyRecord("smoke", "study", uri, {}, plan, dict(ARMS), {}, trials)
    curves = reading_curves.learning_curves(rec, phase="explore")
    assert "dev_loss" in curves and "dev_f1" not in curves
    made = [values[:-1] for values, phase in zip(losses.values(), trials.phase, strict=True)
            if phase == "explore"]  # fmt: skip
    assert curves.dev_loss.tolist() == pytest.approx([v for own in made for v in own])
    plots.learning_curves(curves, rec, tmp_path / "curves.png")
    plots.lr_vs_f1(rec, tmp_path / "lr.png")
    curve_fig, lr_fig = drawn
    for fig in drawn:
        assert fig.axes[0].get_ylabel() == "dev_loss, lower = better"
        assert "dev_loss" in fig.get_suptitle() and "F1" not in fig.get_suptitle()
    points = np.concatenate([c.get_offsets()[:, 1] for c in lr_fig.axes[0].collections
                             if len(c.get_offsets())])  # fmt: skip
    explore = trials[trials.phase == "explore"]
    assert sorted(points) == pytest.approx(sorted(explore.dev_loss))
