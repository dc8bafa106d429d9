"""What the benchmarks share, run as `python bench/NAME.py` from the repository root: the
header line that says which machine and precision the numbers were made on. The local
services a benchmark starts (servers.py, mlflow_server.py, ray_nodes.py, layer_store.py) are
modules beside this one, imported by name; the tests import them too (docs/testing.md).
"""

from __future__ import annotations

import os

# the CPU flags a bench's speed depends on most: wide vectors and the bf16 / AMX units
SPEED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def trial_machine_line(config: dict) -> str:
    """`machine_line` for a bench that trains trials of `config` here: the precision its
    `precision` setting (default auto) resolves to on this host's device."""
    import torch

    from trainables.settings.precision import host_has_native_bf16, resolve_precision

    written = str(config.get("precision") or "auto")
    cuda, native = torch.cuda.is_available(), host_has_native_bf16()
    return machine_line(resolve_precision(written, cuda=cuda, native_bf16=native))


NO_TRAINING = "none (this bench trains no model)"
SYNTHETIC = "none (the synthetic trainable: no model is trained)"


def machine_line(precision: str) -> str:
    """A bench's header: the CPU and cores, its speed-relevant flags, whether it has native
    bf16 (or the forced answer) and the precision the numbers were made in."""
    from study.fingerprint import hardware
    from trainables.settings.precision import (
        FORCE_ENV,
        cpuinfo_flags,
        forced_answer,
        host_has_native_bf16,
        onednn_bf16_cap,
    )

    present = cpuinfo_flags()
    flags = " ".join(f for f in SPEED_FLAGS if f in present) or "none of " + ", ".join(SPEED_FLAGS)
    native = "native bf16" if host_has_native_bf16() else "no native bf16"
    if forced_answer() is not None:
        native += f" (forced: {FORCE_ENV}={os.environ[FORCE_ENV]})"
    elif cap := onednn_bf16_cap():
        native += f" (oneDNN capped: {cap})"
    return f"{hardware()}; flags: {flags}; {native}; precision {precision}"
