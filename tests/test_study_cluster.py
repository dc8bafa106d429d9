"""A study on a two-node Ray cluster on this machine: `ray start --head` and a second
`ray start --address`, each with its own temp dir, with token authentication, each node with
one CPU so trials must use both. Teardown kills only these nodes' process groups.

Ray 2.6x puts the nodes on the machine's address even when `--node-ip-address 127.0.0.1` is
asked for (the GCS listens on every interface), so token authentication is what keeps this
cluster private. The session folder is short on purpose: Ray's Unix sockets live in it and
their paths may not exceed 107 bytes, which a pytest `tmp_path` easily does."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from study.execution.runtime import storage_problem
from study.execution.storage import StudyStore
from tests.study_helpers import run_study, runs_by_kind, write_study

pytestmark = pytest.mark.study
RAY = shutil.which("ray")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_node(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [RAY, "start", "--block", "--num-cpus", "1", "--disable-usage-stats", *args],
        env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


def _wait_for_nodes(
    address: str, env: dict, count: int, nodes: list[subprocess.Popen], log: Path,
    timeout: float = 120,
) -> None:  # fmt: skip
    probe = (
        "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
        "print(sum(1 for n in ray.nodes() if n['Alive']))"
    )
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(node.poll() is not None for node in nodes):
            pytest.fail(f"a Ray node exited while starting: {log.read_text()[-1500:]}")
        out = subprocess.run(
            [sys.executable, "-c", probe, address], env=env, capture_output=True, text=True
        )
        if out.returncode == 0 and out.stdout.strip().endswith(str(count)):
            return
        time.sleep(2)
    pytest.fail(f"the {count}-node Ray cluster did not come up: {out.stderr[-500:]}")


@pytest.fixture
def two_nodes(tmp_path):
    if RAY is None:
        pytest.skip("the `ray` command is not on PATH")
    port = _free_port()
    session = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    (session / "h").mkdir()
    (session / "w").mkdir()
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1",
    }
    head = _start_node(
        ["--head", "--port", str(port), "--temp-dir", str(session / "h"),
         "--include-dashboard", "false"],
        env, tmp_path / "head.log",
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    nodes = [head]
    try:
        _wait_for_nodes(address, env, 1, nodes, tmp_path / "head.log")
        worker_args = ["--address", address, "--temp-dir", str(session / "w")]
        nodes.append(_start_node(worker_args, env, tmp_path / "worker.log"))
        _wait_for_nodes(address, env, 2, nodes, tmp_path / "worker.log")
        assert any((session / "w").iterdir()), "the worker node ignored its --temp-dir"
        yield address, env
    finally:
        for node in nodes:
            with_group = os.getpgid(node.pid) if node.poll() is None else None
            if with_group:
                os.killpg(with_group, signal.SIGTERM)
        for node in nodes:
            try:
                node.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
        shutil.rmtree(session, ignore_errors=True)


def test_a_study_runs_its_trials_on_both_nodes(two_nodes, tmp_path, tiny_model, tiny_corpus):
    address, env = two_nodes
    study = write_study(tmp_path, str(tiny_model), tiny_corpus)
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
    assert "Traceback" not in done.stderr


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
