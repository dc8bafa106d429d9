"""The one precision of a study: `auto` resolved once, by the driver, for every trial.

A study never mixes precisions: an arm trained in bf16 against one in fp32 would measure the
precision along with the factor. So `precision` is set under `fixed` only (study/spec/
factors.py refuses it in `grid` and `search`), and its `auto` (the default) is resolved here,
once per study, from what the driver knows before any trial starts: a GPU per trial in
`resources` means bf16 on CUDA; otherwise the driver host's own CPU decides (bf16
where /proc/cpuinfo shows native bf16, trainables/settings/precision.py). The answer is kept in the
study's state (study.json), so a resumed study goes on in the precision it started in, whichever
host resumes it, and every trial config carries it as its `precision` param.

On a cluster the workers' CPUs may differ from the driver's: a worker that cannot run the
study's precision fails its trial with one line naming it (trainables/model/device.py) rather than
silently training in another. A local study (no --address) runs its trials on the driver's
host, so an explicit bf16 there is refused before the study starts.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from study.spec import StudySpec
from trainables.errors import ConfigError
from trainables.settings import AUTO, BF16, FP32, host_has_native_bf16, no_native_bf16
from trainables.settings import resolve_precision as resolve_for_device

if TYPE_CHECKING:  # the state is handed in: the driver's execution package is not loaded here
    from study.execution.state import StudyState

PRECISION_KEY = "precision"  # in the study's state, the study run's tags and the trial config


def written_precision(spec: StudySpec) -> str:
    return spec.fixed.get(PRECISION_KEY, AUTO)


def uses_gpu(spec: StudySpec) -> bool:
    return spec.resources.get("gpu", 0) > 0


def resolved_precision(spec: StudySpec) -> str:
    """The study file's precision made concrete for this driver host and the resources."""
    return resolve_for_device(
        written_precision(spec), cuda=uses_gpu(spec), native_bf16=host_has_native_bf16()
    )


def with_precision(spec: StudySpec, precision: str) -> StudySpec:
    return dataclasses.replace(spec, fixed={**spec.fixed, PRECISION_KEY: precision})


def settle_precision(
    spec: StudySpec, state: StudyState, *, resumed: bool, local: bool
) -> StudySpec:
    """The spec with its one precision fixed, recorded in `state` for a new study and read
    from it for a resumed one. A study saved before its precision was recorded ran at the
    trial default of that time, fp32, unless its file fixed one."""
    written = written_precision(spec)
    if state.precision is not None:
        precision = state.precision
    elif resumed:
        precision = FP32 if written == AUTO else written
    else:
        precision = resolved_precision(spec)
    if written not in (AUTO, precision):
        raise ConfigError(
            f"fixed.precision={written!r}: this study run started in {precision} and one study "
            f"never mixes precisions; resume it with precision: {precision} (or auto), or start "
            "a new run"
        )
    if local and precision == BF16 and not uses_gpu(spec) and not host_has_native_bf16():
        raise no_native_bf16("this machine's CPU, where the trials of a local study run,")
    state.precision = precision
    return with_precision(spec, precision)
