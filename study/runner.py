"""`run_study`: a study run from Python (a notebook, a script) exactly as `python -m study.run`
runs it, through the same `study.run.run`, leaving the caller's process as it found it.

The command line's process ends after its study, and with it what the driver set for the
process: environment variables (its own, Tune's and MLflow's settings, and what `ray.init`
and `mlflow.set_tracking_uri` write), the logging configuration and a local Ray. A notebook
goes on after the study, and a later study or subprocess would inherit all of that, so each is
put back when the study ends, however it ends.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import mlflow
import ray

from study.command_line import EXIT_OK, arguments
from study.run import StudyOutcome, interrupted_line, run
from trainables.errors import UserInputError

# loggers whose level the driver sets (study.run's _set_up_driver), put back after the study
_DRIVER_LOGGERS = ("", "mlflow", "alembic")


class StudyStopped(RuntimeError):
    """The study stopped before its end (its storage full or unreachable, a phase stopped):
    its state is saved, and `outcome.resume` is the command that continues it (as does
    `run_study(..., resume=True)` with the same overrides). Or it ran without a report
    (every trial failed, Tune failed, or the report did): `outcome.error` says why, in the
    command's line."""

    def __init__(self, outcome: StudyOutcome) -> None:
        if outcome.error:
            code = outcome.exit_code
            message = f"study {outcome.study} failed (exit code {code}): {outcome.error}"
        else:
            message = (f"study {outcome.study} stopped before its end (exit code "
                       f"{outcome.exit_code}); its state is saved, continue it with: "
                       f"{outcome.resume}")  # fmt: skip
        super().__init__(message)
        self.outcome = outcome


def run_study(
    name: str | os.PathLike,
    profile: str | None = None,
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    tracking_uri: str | None = None,
    *,
    storage: str | None = None,
    reports: str | None = None,
    resume: bool = False,
    dry_run: bool = False,
    max_concurrent: int | None = None,
    num_cpus: int | None = None,
    address: str | None = None,
    optuna_storage: str | None = None,
    verbose: bool = False,
) -> StudyOutcome:
    """Run a study as `python -m study.run NAME` does, and return how it ended: the study
    run's id in `run_id`, its store in `tracking_uri`, the report's folder in `report`.

    `name` is looked up as the command looks it up (a path, then ./search_spaces/, then the
    shipped studies); `profile` None is the command's default profile. `overrides` are the
    command's `--set` options: a list of "KEY=VALUE" texts (the VALUE read as YAML), or a
    mapping of dotted keys to Python values (`{"fixed.epochs": 2}`), applied in order and
    checked like the file. Every other argument is the flag of the same name; None is the
    flag's default (folders relative to the current one, as on the command line).

    Raises UserInputError (one line naming the file, field or option) for bad input, before
    anything is written; StudyStopped when the study stopped before its end with its state
    saved. Ctrl-C (KeyboardInterrupt) prints the resume command and propagates.
    """
    args = arguments(
        str(name), profile=profile, overrides=_override_texts(overrides),
        tracking_uri=tracking_uri, storage=storage, reports=reports, resume=resume,
        dry_run=dry_run, max_concurrent=max_concurrent, num_cpus=num_cpus, address=address,
        optuna_storage=optuna_storage, verbose=verbose,
    )  # fmt: skip
    with _process_kept():
        try:
            outcome = run(args)
        except KeyboardInterrupt:
            print(interrupted_line(args), file=sys.stderr)
            raise
    if outcome.exit_code != EXIT_OK:
        raise StudyStopped(outcome)
    return outcome


def _override_texts(overrides: Mapping[str, Any] | Sequence[str] | None) -> list[str]:
    """`--set` texts: a mapping's values as JSON, which YAML reads back as the same value
    (`"off"` stays text, `1e-05` a number)."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        raise UserInputError(
            f"overrides={overrides!r}: expected a list of 'KEY=VALUE' texts or a mapping of "
            "keys to values"
        )
    if isinstance(overrides, Mapping):
        return [f"{key}={json.dumps(value, default=str)}" for key, value in overrides.items()]
    return [str(text) for text in overrides]


@contextmanager
def _process_kept() -> Iterator[None]:
    """The environment, the MLflow tracking URI, the driver's loggers and Ray as they were
    before the study (see the module's docstring)."""
    environ = dict(os.environ)
    uri = mlflow.get_tracking_uri() if mlflow.tracking.is_tracking_uri_set() else None
    loggers = {name: logging.getLogger(name) for name in _DRIVER_LOGGERS}
    levels = {name: logger.level for name, logger in loggers.items()}
    handlers = list(logging.getLogger().handlers)
    ray_was_running = ray.is_initialized()
    try:
        yield
    finally:
        if not ray_was_running and ray.is_initialized():
            ray.shutdown()
        if mlflow.tracking.is_tracking_uri_set() or uri is not None:
            mlflow.set_tracking_uri(uri)
        logging.getLogger().handlers[:] = handlers
        for name, logger in loggers.items():
            logger.setLevel(levels[name])
        os.environ.clear()
        os.environ.update(environ)
