"""MLflow tracking of a study: `store` (the run tree, no Ray), `callback` (the Tune callback
the driver runs), `summary` (what the driver prints at the end, read back from MLflow).
"""

from __future__ import annotations

from study.tracking.callback import MlflowTrackingCallback, trial_error_text
from study.tracking.store import (
    MAX_BATCH,
    StudyTracker,
    artifact_location,
    numeric_metrics,
    result_batches,
    split_layer_metrics,
    trial_status,
)

__all__ = [
    "MAX_BATCH", "MlflowTrackingCallback", "StudyTracker", "artifact_location",
    "numeric_metrics", "result_batches", "split_layer_metrics", "trial_error_text",
    "trial_status",
]  # fmt: skip
