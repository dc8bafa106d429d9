"""Which floating-point precision a trial trains in, decided without importing torch.

`auto` (the default) is bf16 on a CUDA device and on a CPU with native bf16 instructions
(AVX-512 BF16 or AMX), fp32 elsewhere. Native matters: there a bf16 matmul runs several times
faster than an fp32 one (docs/benchmarks.md), while a CPU without it emulates bf16 through
fp32 and gains nothing. Master weights and the AdamW state stay fp32 either way; only the
forward and backward compute under bf16 autocast (trainables/model/device.py).

Two readers of the same facts: the study driver, which imports no torch, reads its host's
flags from /proc/cpuinfo to resolve `auto` once for a whole study (study/precision.py); a
trial's own process asks torch about its CPU (trainables/model/device.py) and refuses a bf16 it
cannot run natively. Both obey the forced answer in the environment variable FORCE_ENV, which
lets a test or a user stand in for a CPU with (1) or without (0) native bf16.

Native also needs oneDNN, which runs torch's bf16 matmuls on a CPU, to be allowed the CPU's bf16
instructions: an environment that caps it below them (ONEDNN_MAX_CPU_ISA=AVX2, say, to act out
an older CPU) leaves the flags in place while its bf16 matmuls fall back to slower code than
fp32's (bench/onednn_isa_cap.py). Both readers count such a cap as no native bf16.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from trainables.errors import ConfigError

AUTO, FP32, BF16 = "auto", "fp32", "bf16"
PRECISIONS = (AUTO, FP32, BF16)
# /proc/cpuinfo's names for native bf16 arithmetic, which torch's CPU capabilities share
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
NATIVE_BF16_WORDS = "AVX-512 BF16 or AMX"
FORCE_ENV = "NER_DEPTH_CPU_BF16"
CPUINFO = Path("/proc/cpuinfo")
# oneDNN's cap on its instruction sets, the newer name first as oneDNN reads them, and the caps
# below AVX512_CORE_BF16 (oneDNN's names, which torch's oneDNN takes in either case)
ONEDNN_ISA_ENVS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
ONEDNN_ISAS_WITHOUT_BF16 = frozenset(
    ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI")
)


def forced_answer() -> bool | None:
    """The answer FORCE_ENV gives in place of the CPU's own flags; None when it is unset."""
    value = os.environ.get(FORCE_ENV, "").strip()
    if not value:
        return None
    if value not in ("0", "1"):
        raise ConfigError(
            f"{FORCE_ENV}={value!r} is not allowed: expected 1 (treat the CPU as having native "
            "bf16) or 0 (as not having it), or leave it unset"
        )
    return value == "1"


def cpuinfo_flags(path: Path = CPUINFO) -> frozenset[str]:
    """The feature flags of the first processor listed in a Linux /proc/cpuinfo (x86 calls
    the line `flags`, ARM `Features`); empty where the file cannot be read."""
    try:
        text = path.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def onednn_bf16_cap() -> str | None:
    """`NAME=VALUE` of the environment's cap on oneDNN where it rules out native bf16; None
    where no cap is set, or where the one set still allows bf16 (or is a name oneDNN ignores)."""
    for name in ONEDNN_ISA_ENVS:
        value = os.environ.get(name, "")
        if value:
            return f"{name}={value}" if value.upper() in ONEDNN_ISAS_WITHOUT_BF16 else None
    return None


def instruction_caps() -> list[str]:
    """`NAME=VALUE` of each cap set in the environment on the vector instructions torch's CPU
    kernels may use (its own, oneDNN's, MKL's), for a description of where numbers were made:
    a run with a cap is slower than the flags suggest."""
    names = ("ATEN_CPU_CAPABILITY", *ONEDNN_ISA_ENVS, "MKL_ENABLE_INSTRUCTIONS")
    return [f"{name}={os.environ[name]}" for name in names if os.environ.get(name)]


def has_native_bf16(flags: Iterable[str]) -> bool:
    present = set(flags)
    return any(flag in present for flag in NATIVE_BF16_FLAGS)


def native_bf16(flags_say: Callable[[], bool]) -> bool:
    """Either reader's answer from its own flag source: the forced answer where one is set,
    else what the flags say, unless oneDNN is capped below them."""
    forced = forced_answer()
    if forced is not None:
        return forced
    return flags_say() and onednn_bf16_cap() is None


def host_has_native_bf16(path: Path = CPUINFO) -> bool:
    """Whether this host's CPU has native bf16, by /proc/cpuinfo (`native_bf16`)."""
    return native_bf16(lambda: has_native_bf16(cpuinfo_flags(path)))


def resolve_precision(precision: str, *, cuda: bool, native_bf16: bool) -> str:
    """`auto` made concrete for a device: bf16 on CUDA or a CPU with native bf16, else fp32.
    An explicit precision is kept; whether the device can run it is checked where it runs."""
    if precision != AUTO:
        return precision
    return BF16 if cuda or native_bf16 else FP32


def no_native_bf16(where: str) -> ConfigError:
    """The one line that refuses bf16 on a CPU without it, or with oneDNN capped below it."""
    cap = onednn_bf16_cap()
    lacks = f"{where} has oneDNN capped below it ({cap})" if cap else f"{where} has neither"
    return ConfigError(
        f"precision=bf16 needs a CPU with native bf16 ({NATIVE_BF16_WORDS}), and {lacks}; use "
        "precision: fp32, or auto (bf16 only where the CPU has it)"
    )
