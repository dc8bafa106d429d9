"""The names the driver, the tracking callback and the report must spell alike.

A study writes MLflow from the driver and reads it back in the report, possibly years later
and on another machine; a tag spelt one way on one side and another way on the other would
silently drop runs. Each such name is defined once, here, except those the trainable reads
too: those are defined in `trainables.settings` and named here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from study.outputs import OUTPUTS
from trainables.settings import CHECKPOINT_EVERY_S as CHECKPOINT_EVERY_S
from trainables.settings import INTERMEDIATE, stage_label
from trainables.settings import TRIAL_CONFIG as TRIAL_CONFIG

# phases of a study, in the order they run
EXPLORE, CONFIRM = "explore", "confirm"
PHASES = (EXPLORE, CONFIRM)

# the two parts of a Ray Tune trial's config: the trial settings (under the key the trainable
# reads them from) and the study's bookkeeping
STUDY_TAGS = "study"

# MLflow tags
RUN_KIND = "run_kind"  # which level of the tree a run is
STUDY_KIND, ARM_KIND, TRIAL_KIND = "study", "arm", "trial"
STUDY_RUN_ID = "study_run_id"  # on arm and trial runs: the study run they belong to
ANALYSIS_TAG = "analysis"  # on the study run: the declared analysis, JSON
REUSED_TAG = "confirm_reused"  # on an explore trial run that also counts as a confirm trial
CONVERGED = "converged"  # on a completed trial run: "true" or "false", by the smoothed curve
# on a completed trial run: the name of the rule its `final_gain` was computed by
# (trainables/training/curves.py); where absent the report computes it again from the curve
FINAL_GAIN_RULE_TAG = "final_gain_rule"
# an explore trial's param: who drew its sample, the sampler's model ("tpe", "gp") or "random"
DRAWN_BY = "drawn_by"
LIBRARIES_TAG = "library_versions"  # on the study run: JSON {library: installed version}
OVERRIDES_TAG = "overrides"  # on the study run: the `--set KEY=VALUE` options, JSON
OPTUNA_TAG = "optuna_storage"  # on the study run: the Optuna storage of the explore samples
OPTUNA_STUDIES_TAG = "optuna_studies"  # on the study run: their study names, `<arm>` a pattern
STUDY_ARTIFACT = "study.yaml"  # on the study run: the study as it ran (profile, overrides)
STUDY_HASH_TAG = "study_hash"  # on the study run: sha256 of its first `study.yaml`, the design
# as declared when it started (a resume rewrites the artifact, never this tag)
# MLflow artifacts: the folder of a trial run that holds its layer fingerprint
# (trainables.measures.fingerprints.FILE_NAME), logged by study/tracking/artifacts.py
FINGERPRINT_ARTIFACT = "fingerprint"
# a completed confirm trial's tagger, a Hugging Face folder (study/export/ downloads it)
MODEL_ARTIFACT = "model"
FIXED_FROM_TAG = "fixed_from"  # on the study run: which study and seeds chose a fixed value
TRAINABLE_TAG = "trainable"  # on the study run: tagger, or synthetic (never a finding)
WALL_TAG = "wall_s"  # on the study run: seconds its drivers ran, over every resume
DRIVERS_TAG = "drivers"  # on the study run: the drivers whose time wall_s counts (one
# that was killed, up to its last minute: the tracking callback writes both once a minute)
CODE_TAG = "code_version"  # on the study run: the code its first driver ran
CODE_VERSIONS_TAG = "code_versions"  # on the study run: each driver's code, a JSON list in
# order, a driver with the same code as the one before it folded into it (a resume with
# other code appends it, a killed driver's included)


def factor_value(name: str, value: Any) -> str:
    """A factor's value as an arm id spells it, and so every figure and table of the report:
    a number in its shortest form (`1`, not `1.0`), a list of stages by their names (`spans`)."""
    return stage_label(value) if name == INTERMEDIATE else _short(value)


def _short(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ";".join(_short(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def default_tracking_uri(base: Path | str = OUTPUTS) -> str:
    """A sqlite store in the outputs folder (study/outputs.py; MLflow 3 refuses a bare file
    store)."""
    return f"sqlite:///{(Path(base) / 'mlflow.db').resolve()}"


def tracking_uri(given: str | None) -> str:
    """The tracking URI a command uses: the one given, else MLFLOW_TRACKING_URI, else the
    default store."""
    return given or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri()
