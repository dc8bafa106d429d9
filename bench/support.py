"""The test suite's helpers (synthetic layer stores, an MLflow server, Ray nodes, PostgreSQL)
for the benchmarks, which run as `python bench/X.py` from the repository root.

The helpers live in tests/, which is not installed with `study` and `trainables`, so this
module makes the `tests` package importable from its folder (tests/__init__.py) rather than
putting the repository root on `sys.path` in every script; the helpers' own `tests.*`
imports then resolve inside that package.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).resolve().parent.parent / "tests"


def suite_helper(name: str) -> ModuleType:
    """The helper module tests/<name>.py, imported as `tests.<name>`."""
    if "tests" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "tests", TESTS / "__init__.py", submodule_search_locations=[str(TESTS)]
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules["tests"] = package
        spec.loader.exec_module(package)
    return importlib.import_module(f"tests.{name}")


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
