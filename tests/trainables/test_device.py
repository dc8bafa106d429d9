"""The GPU path's configuration logic, checked on a CPU-only machine: which device a trial
asks for, when bf16 autocast is used, and what a cluster profile requests from Ray."""

from __future__ import annotations

import warnings

import pytest
import torch

from study.plan import make_plan, trial_config
from study.spec import load_study
from trainables.device import autocast, resolve_device
from trainables.errors import ConfigError


def test_auto_is_the_gpu_only_when_torch_sees_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ConfigError, match="device=cuda was asked for"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device("cuda") == torch.device("cuda")


def test_bf16_autocasts_on_the_device_it_runs_on():
    with warnings.catch_warnings():  # a CPU-only torch says it will not enable CUDA autocast
        warnings.simplefilter("ignore", UserWarning)
        context = autocast(torch.device("cuda"), "bf16")
    assert isinstance(context, torch.autocast)
    assert context.device == "cuda" and context.fast_dtype == torch.bfloat16
    on_cpu = autocast(torch.device("cpu"), "bf16")
    assert isinstance(on_cpu, torch.autocast)
    assert on_cpu.device == "cpu" and on_cpu.fast_dtype == torch.bfloat16
    assert not isinstance(autocast(torch.device("cpu"), "fp32"), torch.autocast)
    assert not isinstance(autocast(torch.device("cuda"), "fp32"), torch.autocast)


def test_cluster_profile_asks_ray_for_a_gpu_and_puts_trials_on_it(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # its hub model is not here: depths stay symbolic
    spec = load_study("ner_depth", "cluster")
    assert spec.resources == {"cpu": 4.0, "gpu": 1.0}
    plan = make_plan(spec)
    config = trial_config(spec, plan.arms[0], {"lr": 1e-5}, seed=0)
    assert config["device"] == "cuda" and config["precision"] == "bf16"
    assert config["threads"] == 4  # torch threads follow the CPUs Ray reserves per trial


def test_cpu_profiles_stay_on_the_cpu():
    spec = load_study("ner_depth", "default")
    config = trial_config(spec, make_plan(spec).arms[0], {"lr": 1e-4}, seed=0)
    assert spec.resources["gpu"] == 0 and "device" not in config
    assert config["threads"] == 1  # two 1-thread trials at once on a 2-core machine
