"""Which precision a trial and a study run in: `auto` is bf16 exactly where the CPU reports
native bf16 (or on CUDA), read from the real flag sources and from a forced answer; a study
resolves it once and keeps it; bf16 on a CPU without it is one line."""

from __future__ import annotations

import dataclasses
import platform

import pytest
import torch

from study.execution.state import StudyState
from study.plan import make_plan, trial_config
from study.precision import resolved_precision, settle_precision, with_precision
from study.spec import load_study
from trainables.errors import ConfigError
from trainables.model.device import cpu_has_native_bf16, trial_precision
from trainables.settings.config import TrialConfig
from trainables.settings.precision import (
    CPUINFO,
    FORCE_ENV,
    ONEDNN_ISA_ENVS,
    cpuinfo_flags,
    forced_answer,
    has_native_bf16,
    host_has_native_bf16,
    instruction_caps,
)
from trainables.training.train import Trial

CPU = torch.device("cpu")

X86_WITH = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu vme sse2 avx2 avx512f avx512bw avx512_bf16 avx512_vnni
"""
X86_WITHOUT = X86_WITH.replace(" avx512_bf16", "")
SAPPHIRE = X86_WITHOUT.replace("flags\t\t: ", "flags\t\t: amx_bf16 amx_tile ")
ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes crc32 bf16 i8mm\nCPU part\t: 0xd40\n"


@pytest.fixture
def unforced(monkeypatch):
    for name in (FORCE_ENV, *ONEDNN_ISA_ENVS):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("text", "native"), [(X86_WITH, True), (X86_WITHOUT, False), (SAPPHIRE, True), (ARM, False)]
)
def test_cpuinfo_flags_decide_native_bf16(tmp_path, unforced, text, native):
    """AVX-512 BF16 or AMX: ARM's `bf16` is not taken for native here (not measured)."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text)
    assert "sse2" in cpuinfo_flags(cpuinfo) or "asimd" in cpuinfo_flags(cpuinfo)
    assert host_has_native_bf16(cpuinfo) is native


def test_no_cpuinfo_means_no_native_bf16(tmp_path, unforced):
    assert cpuinfo_flags(tmp_path / "absent") == frozenset()
    assert not host_has_native_bf16(tmp_path / "absent")


@pytest.mark.skipif(
    platform.system() != "Linux" or not CPUINFO.is_file(), reason="no /proc/cpuinfo here"
)
def test_the_kernel_and_torch_agree_on_this_cpu(unforced):
    """The two real flag sources: the driver's (/proc/cpuinfo, no torch) and the worker's
    (torch's own cpuinfo), on the CPU these tests run on."""
    from_kernel = has_native_bf16(cpuinfo_flags())
    assert host_has_native_bf16() is from_kernel
    assert cpu_has_native_bf16() is from_kernel
    expected = "bf16" if from_kernel else "fp32"
    assert trial_precision(CPU, "auto") == expected
    assert resolved_precision(load_study("ner_depth", "default")) == expected


@pytest.mark.parametrize(
    ("caps", "native"),
    [
        ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, False),
        ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}, False),
        ({"DNNL_MAX_CPU_ISA": "AVX512_CORE_VNNI"}, False),  # oneDNN's older name
        ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, True),
        ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}, True),
        ({"ONEDNN_MAX_CPU_ISA": "ALL", "DNNL_MAX_CPU_ISA": "AVX2"}, True),  # the newer name wins
        ({"ONEDNN_MAX_CPU_ISA": "avx512_core"}, False),  # either case
        ({"ONEDNN_MAX_CPU_ISA": "AVX3"}, True),  # not a name oneDNN knows: no cap
    ],
)
def test_onednn_capped_below_bf16_counts_as_no_native_bf16(
    monkeypatch, tmp_path, unforced, caps, native
):
    """The flags stay while oneDNN, torch's bf16 matmuls, may not use them: both readers say
    no, so `auto` is fp32, and an explicit bf16 is one line naming the cap."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(X86_WITH)
    for name, value in caps.items():
        monkeypatch.setenv(name, value)
    assert host_has_native_bf16(cpuinfo) is native
    if not native:
        assert not cpu_has_native_bf16()
        assert trial_precision(CPU, "auto") == "fp32"
        cap = next(iter(caps.items()))
        with pytest.raises(
            ConfigError, match=rf"has oneDNN capped below it \({cap[0]}={cap[1]}\); use"
        ):
            trial_precision(CPU, "bf16")
        spec = with_precision(load_study("ner_depth", "default"), "bf16")
        with pytest.raises(ConfigError, match=rf"study run, has oneDNN capped below it \({cap[0]}"):
            settle_precision(spec, StudyState("x"), resumed=False, local=True)


def test_a_forced_answer_outranks_a_cap(monkeypatch):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setenv(FORCE_ENV, "1")
    assert host_has_native_bf16() is cpu_has_native_bf16() is True


def test_the_caps_on_instructions_are_named_where_the_machine_is_described(monkeypatch):
    from study.fingerprint import hardware

    for name in ("ATEN_CPU_CAPABILITY", *ONEDNN_ISA_ENVS, "MKL_ENABLE_INSTRUCTIONS"):
        monkeypatch.delenv(name, raising=False)
    assert instruction_caps() == []
    assert "capped" not in hardware()
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert instruction_caps() == ["ATEN_CPU_CAPABILITY=avx2", "ONEDNN_MAX_CPU_ISA=AVX2"]
    assert hardware().endswith(
        "; instructions capped by ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2"
    )


@pytest.mark.parametrize(("forced", "auto"), [("1", "bf16"), ("0", "fp32")])
def test_a_forced_answer_stands_in_for_the_cpu(monkeypatch, forced, auto):
    monkeypatch.setenv(FORCE_ENV, forced)
    assert forced_answer() is (forced == "1")
    assert host_has_native_bf16() is cpu_has_native_bf16() is (forced == "1")
    assert trial_precision(CPU, "auto") == auto
    assert trial_precision(CPU, "fp32") == "fp32"
    assert trial_precision(torch.device("cuda"), "auto") == "bf16"  # CUDA: bf16 either way
    assert resolved_precision(load_study("ner_depth", "default")) == auto
    assert resolved_precision(load_study("ner_depth", "smoke")) == auto


def test_a_bad_forced_answer_is_one_line(monkeypatch):
    monkeypatch.setenv(FORCE_ENV, "yes")
    with pytest.raises(ConfigError, match=f"{FORCE_ENV}='yes' is not allowed: expected 1"):
        forced_answer()


def test_bf16_without_native_bf16_is_refused_before_any_data_is_read(monkeypatch, tmp_path):
    monkeypatch.setenv(FORCE_ENV, "0")
    with pytest.raises(ConfigError, match=r"needs a CPU with native bf16 \(AVX-512 BF16 or AMX"):
        trial_precision(CPU, "bf16")
    missing = str(tmp_path / "no-such-file.txt")
    settings = {"precision": "bf16", "device": "cpu", "data": {s: missing for s in ("train",
                "dev", "test")}}  # fmt: skip
    with pytest.raises(ConfigError, match="precision=bf16 needs a CPU with native bf16"):
        Trial(TrialConfig.from_dict(settings))


def test_auto_is_the_default_and_only_known_precisions_pass():
    assert TrialConfig().precision == "auto"
    with pytest.raises(ConfigError, match="precision='fp16' is not allowed"):
        TrialConfig.from_dict({"precision": "fp16"})


def test_a_gpu_study_is_bf16_whatever_the_driver_cpu(monkeypatch):
    monkeypatch.setenv(FORCE_ENV, "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the cluster profile's hub model is not here
    cluster = load_study("ner_depth", "cluster")
    assert cluster.resources["gpu"] == 1
    fixed = {k: v for k, v in cluster.fixed.items() if k != "precision"}  # auto
    assert resolved_precision(dataclasses.replace(cluster, fixed=fixed)) == "bf16"


@pytest.mark.parametrize("forced", ["1", "0"])
def test_every_trial_of_a_study_carries_its_one_precision(monkeypatch, forced):
    monkeypatch.setenv(FORCE_ENV, forced)
    spec = load_study("ner_depth", None)  # the base: 4 arms
    plan = make_plan(spec)
    precisions = {
        trial_config(spec, arm, {"lr": 1e-4}, seed)["precision"]
        for arm in plan.arms
        for seed in range(spec.seeds)
    }
    assert precisions == {"bf16" if forced == "1" else "fp32"}


def test_settled_once_then_kept_when_resumed_on_another_cpu(monkeypatch):
    spec = load_study("ner_depth", "default")
    monkeypatch.setenv(FORCE_ENV, "1")
    state = StudyState("x")
    settled = settle_precision(spec, state, resumed=False, local=True)
    assert state.precision == "bf16" == settled.fixed["precision"]
    monkeypatch.setenv(FORCE_ENV, "0")  # a cluster driver on a CPU without bf16 resumes it
    resumed = settle_precision(spec, dataclasses.replace(state), resumed=True, local=False)
    assert resumed.fixed["precision"] == "bf16"
    with pytest.raises(ConfigError, match="native bf16"):  # locally its trials could not run
        settle_precision(spec, dataclasses.replace(state), resumed=True, local=True)


def test_a_study_saved_before_precision_was_recorded_resumes_in_fp32(monkeypatch):
    monkeypatch.setenv(FORCE_ENV, "1")
    spec = load_study("ner_depth", "default")
    state = StudyState("x", profile="default", phases_done=["explore"])
    assert settle_precision(spec, state, resumed=True, local=True).fixed["precision"] == "fp32"
    assert state.precision == "fp32"


def test_a_changed_precision_cannot_resume_a_study(monkeypatch):
    monkeypatch.setenv(FORCE_ENV, "1")
    now_fp32 = with_precision(load_study("ner_depth", "default"), "fp32")  # the file changed
    with pytest.raises(ConfigError, match="started in bf16 and one study never mixes"):
        settle_precision(now_fp32, StudyState("x", precision="bf16"), resumed=True, local=True)
