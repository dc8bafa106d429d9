"""A layer-dynamics measure is added in trainables/measures/dynamics.py alone: the trial reports
whatever `dynamics.layer_dynamics` returns, and the MLflow store turns each name into a per-layer
metric."""

from __future__ import annotations

from study.tracking.store import split_layer_metrics
from trainables.measures import dynamics
from trainables.settings.config import TrialConfig
from trainables.training.train import Trial


def test_a_new_measure_reaches_the_final_metrics_and_mlflow(trial_settings, monkeypatch):
    measured = dynamics.layer_dynamics

    def with_a_new_measure(encoder, reference, batches):
        values = measured(encoder, reference, batches)
        return values | {"new": [i / 4 for i in range(len(values["l2_sum"]))]}

    monkeypatch.setattr(dynamics, "layer_dynamics", with_a_new_measure)
    final = list(Trial(TrialConfig.from_dict(trial_settings | {"max_steps": 2})).run())[-1]
    assert {k: v for k, v in final.items() if k.startswith("dyn/new/")} == {
        "dyn/new/0": 0.0, "dyn/new/1": 0.25, "dyn/new/2": 0.5,
    }  # fmt: skip
    _, layers = split_layer_metrics(final)
    assert layers["dyn_new"] == {0: 0.0, 1: 0.25, 2: 0.5}
    assert layers.keys() >= {"dyn_l2_sum", "dyn_attn_js", "dyn_cka", "dyn_svcca"}
