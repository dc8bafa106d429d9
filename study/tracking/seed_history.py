"""Which study runs of one experiment ran confirm trials on the same seeds: read from the
tracking store for the report's provenance paragraph and its threat of confirm seeds seen
before under another design (study/report/sections/declaration.py).

A design is the study as it ran: the sha256 of the study run's `study.yaml`, recorded as its
`study_hash` tag when the run was made (study/tracking/start.py); a study run recorded before
that tag existed is hashed from its artifact. Nothing is written here.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from study.names import (
    CONFIRM,
    REUSED_TAG,
    RUN_KIND,
    STUDY_ARTIFACT,
    STUDY_HASH_TAG,
    STUDY_RUN_ID,
    TRIAL_KIND,
)

# where a study run's design hash came from
FROM_TAG, FROM_ARTIFACT = "tag", "artifact"


@dataclass(frozen=True)
class SeedUse:
    """A study run that ran confirm trials on some of the seeds asked about: when it started
    (ms since the epoch), when its first trial started (None: it has none), its design hash
    ('' when neither the tag nor the artifact is there) and where that came from, and which
    of the seeds asked about its confirm trials ran on."""

    run_id: str
    started_ms: int
    first_trial_ms: int | None
    study_hash: str
    hash_from: str
    seeds: tuple[int, ...]


def confirm_seed_uses(tracking_uri: str, study_run: str) -> list[SeedUse]:
    """Every study run of `study_run`'s experiment whose confirm trials (an explore trial
    that stood in for one included) ran on any of `study_run`'s confirm seeds, that study
    run too, oldest first; [] when `study_run` has no confirm trial yet. Trials of any status
    count: a seed was used once a trial ran on it."""
    client = MlflowClient(tracking_uri)
    experiment = client.get_run(study_run).info.experiment_id
    used: dict[str, set[int]] = {}
    for also in (f"tags.phase = '{CONFIRM}'", f"tags.{REUSED_TAG} = 'true'"):
        where = f"tags.{RUN_KIND} = '{TRIAL_KIND}' and {also}"
        for run in _pages(client, experiment, where):
            owner, seed = run.data.tags.get(STUDY_RUN_ID), _seed(run.data.tags.get("seed"))
            if owner and seed is not None:
                used.setdefault(owner, set()).add(seed)
    mine = used.get(study_run, set())
    out = []
    for run_id, seeds in used.items():
        shared = tuple(sorted(seeds & mine))
        if shared:
            out.append(_use(client, experiment, run_id, shared))
    return sorted(out, key=lambda use: (use.started_ms, use.run_id))


def _use(client: MlflowClient, experiment: str, run_id: str, seeds: tuple[int, ...]) -> SeedUse:
    run = client.get_run(run_id)
    first = client.search_runs(
        [experiment],
        f"tags.{STUDY_RUN_ID} = '{run_id}' and tags.{RUN_KIND} = '{TRIAL_KIND}'",
        order_by=["attributes.start_time ASC"],
        max_results=1,
    )
    recorded = run.data.tags.get(STUDY_HASH_TAG)
    digest, source = (recorded, FROM_TAG) if recorded else _artifact_hash(client, run_id)
    return SeedUse(
        run_id=run_id,
        started_ms=int(run.info.start_time or 0),
        first_trial_ms=int(first[0].info.start_time) if first else None,
        study_hash=digest,
        hash_from=source,
        seeds=seeds,
    )


def _artifact_hash(client: MlflowClient, run_id: str) -> tuple[str, str]:
    """The sha256 of a study run's `study.yaml` artifact (what `study_hash` hashes: the
    text as logged, UTF-8), for a run recorded before the tag; as the artifact is now (a
    resume writes it again): ('', '') when it is not there."""
    with tempfile.TemporaryDirectory() as folder:
        try:
            path = client.download_artifacts(run_id, STUDY_ARTIFACT, folder)
            content = Path(path).read_bytes()
        except (MlflowException, OSError):
            return "", ""
    return hashlib.sha256(content).hexdigest(), FROM_ARTIFACT


def _pages(client: MlflowClient, experiment: str, where: str) -> Iterator[Run]:
    token = None
    while True:
        page = client.search_runs([experiment], where, max_results=1000, page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def _seed(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
