"""Device placement and mixed precision, decided from the config in one place."""

from __future__ import annotations

import contextlib

import torch

from trainables.errors import ConfigError


def resolve_device(name: str) -> torch.device:
    """`auto` means the GPU when there is one: a cluster trial asks for it through resources."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda was asked for, but torch sees no CUDA device here")
    return torch.device(name)


def autocast(device: torch.device, precision: str):
    """bf16 autocast on CUDA; full precision otherwise (CPU bf16 matmuls are rarely faster)."""
    if precision == "bf16":
        if device.type != "cuda":
            raise ConfigError("precision=bf16 needs a CUDA device; use precision=fp32 on CPU")
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
