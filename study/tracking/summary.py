"""What the driver prints when a study ends: trials by phase and status and the per-arm
confirm scores, read back from MLflow so that it shows what was recorded, not what the driver
believes it sent."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict

from study.names import CONFIRM, RUN_KIND, STUDY_RUN_ID, TRIAL_KIND
from study.tracking.store import StudyTracker
from trainables.errors import printable


def confirm_summary(tracker: StudyTracker, study_run: str, metric: str = "dev_f1") -> str:
    """Per-arm dev/test F1 (and the study metric, when it is another) over confirm seeds and
    trial counts by status, read back from MLflow so it shows what was recorded."""
    runs = tracker.client.search_runs(
        [tracker.experiment_id],
        filter_string=f"tags.{STUDY_RUN_ID} = '{study_run}' and tags.{RUN_KIND} = '{TRIAL_KIND}'",
        max_results=10000,
    )
    statuses = Counter((r.data.tags.get("phase"), r.data.tags.get("status")) for r in runs)
    lines = ["trials by phase and status: " + ", ".join(
        f"{phase} {status} {n}" for (phase, status), n in sorted(statuses.items())
    )]  # fmt: skip
    per_arm: dict[str, list] = defaultdict(list)
    for run in runs:
        tags = run.data.tags
        if tags.get("phase") == CONFIRM and tags.get("status") == "completed":
            per_arm[tags["arm"]].append(run.data.metrics)
    if per_arm:
        lines.append("confirm phase, mean ± std over seeds (n):")
    shown = ["dev_f1", "test_f1"] + ([metric] if metric not in ("dev_f1", "test_f1") else [])
    for arm, metrics in sorted(per_arm.items()):
        cells = [f"{name} {_mean_std([m.get(name) for m in metrics])}" for name in shown]
        lines.append(f"  {arm:40s} {'  '.join(cells)}  (n={len(metrics)})")
    return printable("\n".join(lines), lines=True)  # arm and metric names, escaped


def _mean_std(values: list[float | None]) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "n/a"
    std = statistics.stdev(present) if len(present) > 1 else 0.0
    return f"{statistics.fmean(present):.4f} ± {std:.4f}"
