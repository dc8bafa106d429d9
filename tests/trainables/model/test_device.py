"""The GPU path's configuration logic, checked on a CPU-only machine: which device a trial
asks for, when bf16 autocast is used, and what a cluster profile requests from Ray."""

from __future__ import annotations

import warnings

import pytest
import torch

from study.plan import make_plan, trial_config
from study.spec import load_study
from trainables.errors import ConfigError
from trainables.model.device import autocast, resolve_device


def test_auto_is_the_gpu_only_when_torch_sees_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ConfigError, match="device=cuda was asked for"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device("cuda") == torch.device("cuda")


@pytest.mark.parametrize("build", ["2.13.0+cpu", "2.13.0+cu128"])
def test_device_cuda_without_cuda_is_one_line_and_exit_2(build, monkeypatch, capsys, tmp_path):
    """`python -m trainables --set device=cuda` where torch finds no CUDA: its opening line, then
    one `error:` line that says why (a CPU-only torch, or no device), exit 2; refused before any
    data is read (the files named do not exist)."""
    import trainables.__main__ as trial_cli

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch, "__version__", build)
    monkeypatch.setattr(torch.version, "cuda", None if build.endswith("+cpu") else "12.8")
    missing = tmp_path / "no-such-file.txt"
    data = "{" + ", ".join(f"{split}: {missing}" for split in ("train", "dev", "test")) + "}"
    code = trial_cli.main(["--set", "device=cuda", "--set", f"data={data}"])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert code == 2
    why = ("this torch (2.13.0+cpu) is built without CUDA (docs/install.md)"
           if build.endswith("+cpu") else "torch sees no CUDA device here")  # fmt: skip
    assert errors == [f"error: device=cuda was asked for, but {why}; device auto or cpu"]


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


@pytest.mark.parametrize(("gpu", "per_gpu"), [(1, 1), (0.5, 2), (0.25, 4)])
def test_fractional_gpus_put_several_trials_on_one_gpu(gpu, per_gpu):
    """1, 2 or 4 trials per GPU: the fraction reaches Ray's resource request whole, each
    trial still trains on the GPU, and as many start at once as the GPUs hold."""
    from ray import tune

    from study.execution.tuner import trials_at_once
    from trainables.tune_adapter import train_tagger

    spec = load_study("smoke", "cluster", overrides=[f"resources.gpu={gpu}"])
    assert spec.resources == {"cpu": 1.0, "gpu": float(gpu)}
    config = trial_config(spec, make_plan(spec).arms[0], {"lr": 1e-4}, seed=0)
    assert config["device"] == "cuda"
    # what tune.with_resources keeps for Tune (its private attribute: a Ray upgrade may move it)
    request = tune.with_resources(train_tagger, dict(spec.resources))._resources
    assert request.bundles == [{"CPU": 1.0, "GPU": float(gpu)}]
    assert trials_at_once(spec.resources, {"CPU": 64.0, "GPU": 8.0}, None) == 8 * per_gpu
    assert trials_at_once(spec.resources, {"CPU": 16.0, "GPU": 8.0}, None) == min(16, 8 * per_gpu)


def test_the_smoke_cluster_profile_shares_a_gpu_four_ways():
    spec = load_study("smoke", "cluster")
    assert spec.resources["gpu"] == 0.25
