"""Device placement and mixed precision, decided from the config in one place.

bf16 runs under autocast: matmuls and their gradients compute in bf16, while the weights,
their gradients and the AdamW state stay fp32 (no loss scaling: bf16 has fp32's exponent
range). Which precision `auto` means is trainables/settings/precision.py's decision; this
module asks torch about the CPU the trial actually runs on.
"""

from __future__ import annotations

import contextlib
import platform

import torch

from trainables.errors import ConfigError
from trainables.settings.precision import (
    BF16,
    NATIVE_BF16_FLAGS,
    native_bf16,
    no_native_bf16,
    resolve_precision,
)


def resolve_device(name: str) -> torch.device:
    """`auto` means the GPU when there is one: a cluster trial asks for it through resources."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device=cuda was asked for, but {no_cuda_reason()}; device auto or cpu")
    return torch.device(name)


def no_cuda_reason() -> str:
    """Which of the two a user must fix: a torch built without CUDA (docs/install.md), or a
    machine (or CUDA_VISIBLE_DEVICES) that shows it no GPU."""
    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is built without CUDA (docs/install.md)"
    return "torch sees no CUDA device here"


def cpu_has_native_bf16() -> bool:
    """Whether this process's CPU has native bf16, by torch's cpuinfo (`native_bf16`)."""

    def torch_says() -> bool:
        capabilities = torch.cpu.get_capabilities()
        return any(bool(capabilities.get(flag, False)) for flag in NATIVE_BF16_FLAGS)

    return native_bf16(torch_says)


def trial_precision(device: torch.device, precision: str) -> str:
    """The precision a trial runs in on `device`: `auto` resolved, and bf16 refused in one
    line on a CPU without native bf16, before any data is read."""
    native = device.type == "cpu" and cpu_has_native_bf16()
    resolved = resolve_precision(precision, cuda=device.type == "cuda", native_bf16=native)
    if resolved == BF16 and device.type == "cpu" and not native:
        cpu = torch.cpu.get_capabilities().get("cpu_name") or platform.processor() or "it"
        raise no_native_bf16(f"this CPU ({cpu})")
    return resolved


def autocast(device: torch.device, precision: str):
    """bf16 autocast for a resolved bf16 (see `trial_precision`); fp32 runs as written."""
    if precision == BF16:
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
