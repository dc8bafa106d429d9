"""A study on a two-node Ray cluster on this machine (bench/ray_nodes.py: `ray start --head`
and a second `ray start --address`, each with its own temp dir and one CPU, so trials must use
both, with token authentication). Where the trials run is Ray's and the driver's business, not
the model's: the study is the tiny study's synthetic twin (tests/study_helpers.py), whose
workers import no torch."""

from __future__ import annotations

import os
from collections import Counter

import pytest
from ray_nodes import head_and_worker

from study.execution.runtime import storage_problem
from study.execution.storage import StudyStore
from tests.study_helpers import (
    driver_tracebacks,
    run_study,
    runs_by_kind,
    write_study,
    write_synthetic_twin,
)

pytestmark = pytest.mark.study


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """One cluster for the module's two tests: a refused token attaches nothing, so either
    test, in either order, finds the cluster as it was started."""
    with head_and_worker(tmp_path_factory.mktemp("nodes")) as (cluster, worker, _):
        assert any(worker.temp_dir.iterdir()), "the worker node ignored its --temp-dir"
        yield cluster.address, cluster.env


def test_a_study_runs_its_trials_on_both_nodes(two_nodes, tmp_path):
    address, env = two_nodes
    study = write_synthetic_twin(tmp_path)
    os.environ.update({k: env[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")})
    try:
        done = run_study(study, tmp_path, "--address", address)
    finally:
        for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN"):
            os.environ.pop(key, None)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Ray: 2 node(s) on 1 host(s)" in done.stderr
    trials = runs_by_kind(tmp_path)["trial"]
    assert len(trials) == 12
    nodes = Counter(r.data.tags.get("ray_node_id") for r in trials)
    assert len(nodes) == 2 and None not in nodes, nodes


def test_a_wrong_token_is_refused_with_one_line(two_nodes, tmp_path, tiny_model, tiny_corpus):
    address, _ = two_nodes
    study = write_study(tmp_path, str(tiny_model), tiny_corpus)
    os.environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "not-the-token"})
    try:
        done = run_study(study, tmp_path, "--address", address, timeout=180)
    finally:
        for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN"):
            os.environ.pop(key, None)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: cannot start or reach --address {address}"), last
    assert not driver_tracebacks(done.stderr), done.stderr[-3000:]


def _nodes(*hosts: str) -> list[dict]:
    return [{"NodeManagerAddress": host, "Alive": True} for host in hosts]


def test_multi_host_cluster_refuses_local_storage(tmp_path):
    """The check itself, on node records shaped as `ray.nodes()` reports them."""
    local = StudyStore(str(tmp_path / "results"))
    problem = storage_problem(_nodes("host-a", "host-b"), local)
    assert problem and "spans 2 hosts" in problem and "s3://" in problem
    assert storage_problem(_nodes("127.0.0.1", "127.0.0.1"), local) is None  # one machine
    shared = StudyStore(f"file://{tmp_path / 'shared'}")
    assert storage_problem(_nodes("host-a", "host-b"), shared) is None
