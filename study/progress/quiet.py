"""Keep Ray's own output out of a study's terminal unless `--verbose`.

Two sources. Tune's driver prints a configuration table per trial, a result table per
finished trial and a status table every few seconds: its `verbose` setting silences those
(`tune_verbosity`, set on every experiment by `study.execution.tuner`), except the table and
the "View detailed results here" lines its newer output engine prints at each experiment's
start whatever the setting, so the driver uses Tune's plain output engine unless `--verbose`
(`quiet_driver`). And every trial's process logs `Checkpoint successfully created at: <path>`
at each evaluation and `Restored on ... from checkpoint` after a restart, which Ray forwards
to the driver's terminal: `quiet_workers` runs in every worker process of the study (ray.init's
`worker_process_setup_hook`) and lets only warnings and errors of those loggers through.
A Ray the study starts itself also warns, at every start, that it secured the cluster with a
token, as Ray does by default (`quiet_ray_start`). And Tune logs every failed attempt of a
trial with the worker's whole traceback (some 40 lines); unless `--verbose` it does not, and
the progress callback says each failure in one line instead (`quiet_driver`); its closing
`Trials did not complete: [train_tagger_...]`, in Ray's trial ids, stays out too: the study's
own lines named each errored trial, and its summary counts them; so do its lines on Ctrl-C,
which name Tune's resume call (the study prints its own `--resume` command).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

WORKER_HOOK = "study.progress.quiet.quiet_workers"
OUTPUT_ENGINE_ENV = "RAY_AIR_NEW_OUTPUT"  # Tune's choice of output engine; "0": the plain one
TRIAL_ERRORS_ENV = "TUNE_PRINT_ALL_TRIAL_ERRORS"  # "0": Tune logs no failed attempt's traceback
RAY_LOGGERS = ("ray.train", "ray.tune")
RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
TUNE_RUN_LOGGER = "ray.tune.tune"  # where tune.run logs "Trials did not complete: [...]"
INCOMPLETE = "Trials did not complete"
# what it logs on Ctrl-C: that it stops (said here in the study's words instead) and, once
# stopped, how to resume with its own API (the study prints its `--resume` command)
STOPPING = "Stop signal received"
INTERRUPTED = "Experiment has been interrupted"


def quiet_workers() -> None:
    for name in RAY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def ray_init_options(verbose: bool) -> dict:
    """What `ray.init` takes so that trials' processes are quiet (nothing with --verbose)."""
    return {} if verbose else {"runtime_env": {"worker_process_setup_hook": WORKER_HOOK}}


@contextmanager
def logger_level(name: str, level: int) -> Iterator[None]:
    """`name`'s logger at `level` for the block, then as it was."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def quiet_ray_start(verbose: bool) -> AbstractContextManager[None]:
    """Around the `ray.init` that starts a local Ray: its warning that token authentication
    is on (which the user neither asked for nor needs to act on) stays out unless --verbose."""
    return nullcontext() if verbose else logger_level(RAY_AUTH_LOGGER, logging.ERROR)


def tune_verbosity(verbose: bool) -> int:
    """Tune's own tables and status lines: none, or its default with --verbose."""
    return 1 if verbose else 0


def quiet_driver(verbose: bool) -> None:
    """Before Tune runs: its plain output engine, silent at verbosity 0, no traceback per
    failed trial attempt and no closing list of them (a value the user set wins)."""
    if not verbose:
        os.environ.setdefault(OUTPUT_ENGINE_ENV, "0")
        os.environ.setdefault(TRIAL_ERRORS_ENV, "0")
        logger = logging.getLogger(TUNE_RUN_LOGGER)
        if not any(isinstance(f, _HideTuneLines) for f in logger.filters):
            logger.addFilter(_HideTuneLines())


class _HideTuneLines(logging.Filter):
    """Drop Tune's list of the trials that errored, in its own ids, and its lines on Ctrl-C:
    they are written past the progress line without clearing it, and the last gives Tune's
    resume call, not the study's. The first is said again through the study's logger, which
    clears the progress line first."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if message.startswith(STOPPING):
            logging.getLogger("study").warning(
                "stopping: the running trials end and the study's state is saved (Ctrl-C "
                "again skips saving it)"
            )
        return not message.startswith((INCOMPLETE, STOPPING, INTERRUPTED))
