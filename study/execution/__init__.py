"""Running a study on Ray: everything between a checked study file and trials in MLflow.

- `runtime`: start or join Ray, refusing an unreachable cluster or unshared storage early;
- `context`: `PhaseContext`, what every phase of one invocation shares;
- `phases`: explore, then confirm, skipping what the state file records as done;
- `rounds`: the confirm phase in rounds, under the declared sequential rule;
- `tuner`: one Ray Tune experiment, new or restored, and what Tune saved of it;
- `storage`: the results folder's layout; `state`: the study's state file (`StudyState`), which
  no other module opens;
- `storage_guard` and `saved_state`: a full disk stops the study cleanly and leaves what
  `--resume` reads whole; `storage_outage`: likewise for object storage that stops answering;
- `failure`: any other failure of a running study ends its MLflow runs as FAILED in one line;
- `storage_uri`: sub-paths of a storage path or URI (joined on its path, its query kept).
"""

from __future__ import annotations

from study.execution.context import PhaseContext
from study.execution.failure import every_trial_failed, failure_reason, settle_failed_study
from study.execution.phases import run_phases
from study.execution.runtime import (
    check_address,
    local_resources,
    ray_stopped_meanwhile,
    start_tracking_and_ray,
    stop_ray,
    too_large,
    unplaceable_on_cluster,
)
from study.execution.saved_state import SpaceReserve
from study.execution.settings_guard import (
    refused_settings,
    refused_settings_line,
    settle_refused_settings,
)
from study.execution.state import study_folder
from study.execution.storage import StudyStore
from study.execution.storage_guard import is_storage_full, settle_full_storage
from study.execution.storage_outage import is_storage_unreachable, settle_unreachable_storage

__all__ = [
    "PhaseContext", "SpaceReserve", "StudyStore", "check_address", "every_trial_failed",
    "failure_reason", "is_storage_full", "is_storage_unreachable", "local_resources",
    "ray_stopped_meanwhile", "refused_settings", "refused_settings_line", "run_phases",
    "settle_failed_study", "settle_full_storage", "settle_refused_settings",
    "settle_unreachable_storage", "start_tracking_and_ray", "stop_ray", "study_folder",
    "too_large", "unplaceable_on_cluster",
]  # fmt: skip
