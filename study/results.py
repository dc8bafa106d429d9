"""A study's results as pandas tables, for a notebook: its trials and its comparisons, read from
MLflow by the same code that makes the report, so a notebook and the report never disagree.

`load_trials` is `study.tracking.reading`'s trial table (`StudyRecord.trials`); `load_verdicts`
is the report's comparisons (`study.report.build.compare_record`, the rows of its
`comparisons.csv`). Neither loads Ray; importing this module loads no torch either (the
report's ASO loads deepsig, and with it torch, when `load_verdicts` computes it).
"""

from __future__ import annotations

import pandas as pd

from study.names import tracking_uri as resolved_uri
from study.report.build import compare_record, comparisons_table
from study.tracking.reading import load_study_record


def load_trials(tracking_uri: str | None, study: str, run_id: str | None = None) -> pd.DataFrame:
    """One row per trial of a study run: `run_id` (the trial's MLflow run), its tags (`arm`,
    `phase`, `sample`, `seed`, `status`, ...), every setting (params parsed back to values:
    `lr` a number, `depth` as written) and every final metric (`dev_f1`, `test_f1`, ...).

    `tracking_uri` None is the commands' default (MLFLOW_TRACKING_URI, else
    sqlite:///outputs/mlflow.db under the current folder); `run_id` None is the newest
    finished study run of `study` (else the newest). Raises UserInputError when the store has
    no such study or run."""
    return load_study_record(resolved_uri(tracking_uri), study, run_id).trials


def load_verdicts(tracking_uri: str | None, study: str, run_id: str | None = None) -> pd.DataFrame:
    """One row per comparison of two arms, as the report computes them (`comparisons.csv`):
    `arm_a`, `arm_b`, `metric`, `primary`, `diff`, `ci_low`, `ci_high`, p values, `outcome`,
    `verdict` and the seeds paired. Only primary rows carry a decided verdict; the rest are
    exploratory. Arguments as `load_trials`."""
    record = load_study_record(resolved_uri(tracking_uri), study, run_id)
    return comparisons_table(compare_record(record))
