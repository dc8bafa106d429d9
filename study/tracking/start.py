"""Start tracking one invocation of a study: check the store answers, open it, and open the
study run and its arm runs with what makes their numbers traceable.

The checks come before Ray starts: MLflow's own client retries an unreachable server for
minutes, and a bad URI found after the trials started would leave them with nowhere to write.
The study run carries the plan, the code, model and data fingerprints, the library versions,
the precision, the hardware and the declared analysis, so a number in MLflow can be traced to
what produced it; it is found again by the invocation id after a restart, so `--resume` writes
under the same runs.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from study.fingerprint import (
    code_version,
    data_fingerprint,
    hardware,
    library_versions,
    model_fingerprint,
    study_hash,
)
from study.names import (
    ANALYSIS_TAG,
    CODE_TAG,
    CODE_VERSIONS_TAG,
    DRIVERS_TAG,
    FIXED_FROM_TAG,
    LIBRARIES_TAG,
    OVERRIDES_TAG,
    STUDY_ARTIFACT,
    STUDY_HASH_TAG,
    TRAINABLE_TAG,
    WALL_TAG,
)
from study.plan import StudyPlan
from study.precision import PRECISION_KEY, resolved_precision
from study.spec import StudySpec
from study.tracking.probe import probe_database, probe_server_store, shown_uri, sqlite_file
from study.tracking.reading import listed_code_versions
from study.tracking.store import StudyTracker
from trainables.errors import UserInputError, first_line
from trainables.settings import SYNTHETIC, TAGGER

log = logging.getLogger("study")


def probe_tracking(uri: str) -> None:
    """Fail fast with one line when a tracking server does not answer, before Ray starts:
    MLflow's own client retries an unreachable server for minutes before it gives up. A
    server that answers, or a database, is then tried for real (see study/tracking/probe.py)."""
    if not uri.startswith(("http://", "https://")):
        probe_database(uri)
        return
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=5).read()
    except (urllib.error.URLError, OSError) as err:
        raise UserInputError(f"MLflow tracking server {uri} is not reachable: {err}") from err
    probe_server_store(uri)


# what a database says when another process is creating MLflow's tables at the same moment
# (two drivers started together on a fresh store): not the user's URI, and gone on a retry
SCHEMA_RACE = ("alembic_version", "online migration", "already exists", "database is locked",
               "unique constraint failed", "duplicate key")  # fmt: skip
SCHEMA_RETRIES = 5


def connect_tracking(uri: str, experiment: str) -> StudyTracker:
    """Open the tracking store; any error there is the user's URI or server, said in one line,
    except a race with another process creating the same store's schema, which is retried.
    MLflow makes a new sqlite file but not its folder (`outputs/` on a first run): made here,
    once every check has passed."""
    database = sqlite_file(uri)
    if database is not None:
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(SCHEMA_RETRIES + 1):
        try:
            return StudyTracker(uri, experiment)
        except Exception as err:  # noqa: BLE001 - see the docstring
            if attempt < SCHEMA_RETRIES and schema_race(err):
                log.info("the tracking store is being set up by another process; trying again")
                time.sleep(1.0 + attempt)
                continue
            raise UserInputError(
                f"MLflow tracking URI {shown_uri(uri)} cannot be used: {first_line(err)}"
            ) from err
    raise AssertionError("unreachable")


def schema_race(err: BaseException) -> bool:
    """Whether `err`, or an error it was raised from, is a schema-creation race."""
    seen: BaseException | None = err
    while seen is not None:
        if any(marker in str(seen).lower() for marker in SCHEMA_RACE):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def open_study_runs(
    tracker: StudyTracker,
    spec: StudySpec,
    plan: StudyPlan,
    invocation: str,
    profile: str,
    overrides: list[str] | None = None,
    more_tags: dict[str, str] | None = None,
) -> tuple[str, dict[str, str]]:
    """The study run of this invocation (its id from the study's state) and one arm run per
    arm, made or found again. The study run records the command-line `overrides`, the study
    as it runs (the file, its profile and the overrides merged, paths resolved) as the
    artifact `study.yaml` with its sha256 as the tag `study_hash` (the design when the study
    run was made), and `more_tags` (where the explore samples are in Optuna's storage)."""
    kind = SYNTHETIC if spec.synthetic else TAGGER
    study_text = merged_study(spec)
    tags = {
        "study": spec.name,
        "profile": profile,
        "plan": plan.summary(),
        CODE_TAG: code_version(),
        TRAINABLE_TAG: kind,
        "model": spec.model,
        "model_fingerprint": kind
        if spec.synthetic
        else model_fingerprint(spec.model, spec.model_revision),
        "data_fingerprint": kind if spec.synthetic else data_fingerprint(spec.data),
        PRECISION_KEY: resolved_precision(spec),  # the one of every trial (study/precision.py)
        "study_file": str(spec.path),
        "hardware": hardware(),
        LIBRARIES_TAG: json.dumps(library_versions()),
        ANALYSIS_TAG: spec.analysis.to_json(),
        OVERRIDES_TAG: json.dumps(overrides or []),
        STUDY_HASH_TAG: study_hash(study_text),  # set when the run is made, never on resume
        **(more_tags or {}),
    }
    if spec.fixed_from:  # fixed values another study chose: a threat the report names
        tags[FIXED_FROM_TAG] = json.dumps(spec.fixed_from)
    if spec.compare_baseline is not None:  # resolved values, as the arm runs record them
        tags["compare_baseline"] = json.dumps(spec.compare_baseline)
    name = f"{spec.name}/{profile}" + (" (synthetic)" if spec.synthetic else "")
    study_run = tracker.study_run(invocation, name, tags, {"plan": spec.raw})
    versions = driver_code_versions(tracker.tags(study_run), tags[CODE_TAG])
    tracker.set_tags(study_run, {CODE_VERSIONS_TAG: json.dumps(versions)})
    tracker.log_text(study_run, study_text, STUDY_ARTIFACT)
    arm_runs = {arm.id: tracker.arm_run(study_run, arm.id, arm.factors) for arm in plan.arms}
    return study_run, arm_runs


def driver_code_versions(recorded: dict[str, str], current: str) -> list[str]:
    """The code each driver of the study ran, in order (a driver with the code of the one
    before folded into it), this one's last: a study resumed with other code says so (its
    `code_version` tag stays the first driver's). A study run recorded before the list
    existed starts from its `code_version`."""
    versions = listed_code_versions(recorded) or [recorded.get(CODE_TAG, current)]
    return versions if versions[-1] == current else [*versions, current]


def merged_study(spec: StudySpec) -> str:
    """The study as it runs, as YAML: the file with its profile and the overrides merged, and
    the model and data paths as resolved."""
    merged = {**spec.raw, "model": spec.model, "data": spec.data}
    return yaml.safe_dump(merged, sort_keys=False, allow_unicode=True)


class DriverTime:
    """The study's wall time over every driver that ran it: a resumed study adds this
    driver's time to what its study run recorded when the earlier ones stopped. A driver
    writes it when it ends and, while trials run, once a minute (the tracking callback's
    WALL_EVERY_S), so a killed driver's time counts up to its last minute."""

    def __init__(self, recorded: dict[str, str]):
        self.before = float(recorded.get(WALL_TAG, 0))
        self.drivers = int(recorded.get(DRIVERS_TAG, 0)) + 1
        self.started = time.time()

    def tags(self) -> dict[str, str]:
        wall = self.before + time.time() - self.started
        return {WALL_TAG: f"{wall:.0f}", DRIVERS_TAG: str(self.drivers)}
