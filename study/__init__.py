"""The study driver (`python -m study.run`), its statistics and its report, and the Python API
for notebooks (docs/python-api.md):

    from study import run_study, load_trials, load_verdicts
    outcome = run_study("ner_depth", profile="smoke")        # as python -m study.run does
    trials = load_trials(outcome.tracking_uri, "ner_depth", outcome.run_id)   # one row a trial
    verdicts = load_verdicts(outcome.tracking_uri, "ner_depth", outcome.run_id)

Importing the package imports nothing (it turns MLflow's telemetry off, below): the report
must load without Ray or torch, and the driver's modules import this package first. Each name
below is imported from its module on first use (PEP 562), so `from study import load_trials`
loads the reading side without Ray, and only `run_study` loads the driver.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

# Importing MLflow writes ~/.config/mlflow/telemetry.json unless its telemetry is off: the
# driver, the report, the export and the Python API all import this package before MLflow,
# so set here, once, nothing of theirs writes outside its folders (a user's own setting wins).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

if TYPE_CHECKING:
    from study.results import load_trials, load_verdicts
    from study.run import StudyOutcome
    from study.runner import StudyStopped, run_study
    from trainables.errors import UserInputError

# the public name -> the module that defines it
_HOMES = {
    "run_study": "study.runner",  # run a study in this process, as the command line does
    "StudyStopped": "study.runner",  # a study that stopped before its end; state saved
    "StudyOutcome": "study.run",  # how run_study ended: study run id, store, report folder
    "load_trials": "study.results",  # the trials as a DataFrame, one row a trial
    "load_verdicts": "study.results",  # the report's comparisons and verdicts as a DataFrame
    "UserInputError": "trainables.errors",  # what bad input raises (a study file, an option)
}

__all__ = [
    "StudyOutcome", "StudyStopped", "UserInputError", "load_trials", "load_verdicts",
    "run_study",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'study' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
