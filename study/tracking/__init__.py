"""MLflow tracking of a study, written and read in one place: `store` (the run tree, no Ray),
`callback` (the Tune callback the driver runs), `reading` (a study read back, for the report,
the driver's choice of confirm samples and its confirm rounds, and bench/), `curves` (each
trial's metrics at every evaluation), `summary` (what
the driver prints at the end, read back from MLflow). No module outside this package queries
MLflow (tests/study/tracking/test_results_reader.py).

Only the Ray-free writer is re-exported here, so that importing `study.tracking.reading` (the
report does) loads no Ray; the callback is imported from `study.tracking.callback`.
"""

from __future__ import annotations

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
    "MAX_BATCH", "StudyTracker", "artifact_location", "numeric_metrics", "result_batches",
    "split_layer_metrics", "trial_status",
]  # fmt: skip
