"""bench/gpu_check.py's CPU side, checked on a machine without a GPU before it ever runs on
one: its refusal without CUDA, its options, the peak table's matching, the trial it plans,
and its measuring code on the tiny model on the CPU (the same code a CUDA trial runs)."""

from __future__ import annotations

import json

import gpu_check
import pytest
import torch

from tests.study_helpers import run_in_process


def test_without_cuda_it_says_so_in_one_line_exits_2_and_writes_nothing(
    monkeypatch, capsys, tmp_path
):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    scratch = tmp_path / "scratch"
    assert gpu_check.main(["--scratch", str(scratch)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("gpu_check: no CUDA here: ") and "waits for a GPU machine" in err
    assert not scratch.exists()


def test_its_options_and_their_refusals(capsys):
    args = gpu_check.parse_args([])
    assert args.share == [1, 2, 4, 8] and args.seconds > 0 and args.peak_tflops is None
    assert gpu_check.parse_args(["--share", "4", "2"]).share == [1, 2, 4]  # one alone always
    assert gpu_check.parse_args(["--skip", "study", "share"]).skip == ["study", "share"]
    for bad in (["--share", "0"], ["--seconds", "-1"], ["--seconds", "nan"],
                ["--peak-tflops", "0"], ["--study-gpu", "1.5"], ["--skip", "steps"],
                ["--threads", "0"]):  # fmt: skip
        with pytest.raises(SystemExit) as exited:
            gpu_check.parse_args(bad)
        assert exited.value.code == 2, bad
        assert "error: argument" in capsys.readouterr().err


def test_the_peak_table_matches_names_word_by_word():
    table = {(model, variant): peak for model, variant, peak in gpu_check.PEAK_BF16_TFLOPS}
    names = {
        "NVIDIA H100 80GB HBM3": ("H100", None),
        "NVIDIA H100 PCIe": ("H100", "PCIe"),
        "NVIDIA H100 NVL": ("H100", "NVL"),
        "NVIDIA H200": ("H200", None),
        "NVIDIA A100-SXM4-80GB": ("A100", None),
        "NVIDIA L40S": ("L40S", None),
        "NVIDIA L4": ("L4", None),
        "NVIDIA A10": ("A10", None),
    }
    for name, key in names.items():
        assert gpu_check.peak_bf16_tflops(name) == table[key], name
    for unknown in ("NVIDIA A10G", "NVIDIA L40", "Tesla T4", ""):
        assert gpu_check.peak_bf16_tflops(unknown) is None, unknown


def test_sharing_is_summed_per_round_and_set_against_one_alone():
    def trial(tps: float, step_ms: float) -> dict:
        return {"real_tps": tps, "step_ms": step_ms, "device_used_mb": step_ms * 10}

    rounds = {1: [trial(1000, 10)], 2: [trial(900, 11), trial(700, 14)], 4: [trial(400, 25)] * 4}
    rows = gpu_check.summarize_sharing(rounds)
    assert [row["k"] for row in rows] == [1, 2, 4]
    assert [row["combined_tps"] for row in rows] == [1000, 1600, 1600]
    assert [row["ratio"] for row in rows] == [1.0, 1.6, 1.6]
    assert [row["step_ms"] for row in rows] == [10, 12.5, 25]
    assert [row["best"] for row in rows] == [False, True, False]  # a tie goes to fewer trials
    assert gpu_check.model_flop_utilisation(10**6, 1e6 / 6, 1.0) == pytest.approx(1.0)


def test_the_planned_trial_is_a_ner_depth_trial_on_cuda_in_bf16(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = gpu_check.ner_depth_trial(threads=3)
    assert config["device"] == "cuda" and config["precision"] == "bf16"
    assert config["threads"] == 3 and config["model"] == "minilm"
    assert config["budget"] == {"steps": 630} and config["data_fraction"] == 1.0


def test_the_study_it_runs_is_the_smoke_profile_with_its_gpu_share(tmp_path):
    """What the GPU run starts, planned here as a dry run (which also checks its options):
    four trials to a GPU by default, each on CUDA in bf16."""
    args = gpu_check.parse_args([])
    command = ["python", "-m", "study.run", *gpu_check.study_arguments(args, tmp_path)]
    code, out, err = run_in_process([*command, "--dry-run"])
    assert code == 0, err
    assert "study ner_depth (profile smoke)" in out
    assert "resources per trial {'cpu': 1.0, 'gpu': 0.25}, precision bf16" in out
    assert not any(tmp_path.iterdir())  # a dry run writes nothing


def test_the_steps_are_measured_with_the_first_apart(trial_settings, tmp_path):
    """The code a trial on the GPU runs, here on the CPU: a ready file once warm, a start
    signal, then steps for the time asked."""
    ready, go = tmp_path / "ready", tmp_path / "go"
    go.touch()  # the parent's signal, given at once
    config = trial_settings | {"device": "cpu", "precision": "fp32"}
    r = gpu_check.measure_steps(config, seconds=0.5, ready=ready, go=go)
    assert ready.exists()
    assert r["first_step_s"] > 0 and r["steps"] >= 1 and r["seconds"] >= 0.5
    assert 0 < r["real_tps"] <= r["padded_tps"]
    assert r["step_ms"] > 0 and 0 < r["params_non_embedding"] < r["params"]
    assert r["device"] == "cpu" and "peak_allocated_mb" not in r  # memory is the GPU's only
    json.dumps(r)  # what the child prints


def test_a_whole_trial_reports_its_scores(trial_settings):
    r = gpu_check.run_whole_trial(trial_settings | {"device": "cpu", "precision": "fp32"})
    assert r["steps"] > 0 and 0 <= r["dev_f1"] <= 1 and 0 <= r["test_f1"] <= 1
    assert r["set_up_s"] > 0 and r["train_and_eval_s"] > 0


@pytest.mark.slow  # two trial processes, each importing torch and transformers
def test_a_sharing_round_starts_its_trials_together(trial_settings, tmp_path):
    config = tmp_path / "trial.json"
    config.write_text(json.dumps(trial_settings | {"device": "cpu", "precision": "fp32"}))
    args = gpu_check.parse_args(["--seconds", "1"])
    results = gpu_check.share_round(args, 2, config, tmp_path)
    assert len(results) == 2 and all(r["steps"] >= 1 for r in results)
    assert all((tmp_path / "share-2" / f"ready-{i}").exists() for i in range(2))
