"""A Ray cluster of several nodes on this machine, as the cluster tests and bench/scale.py use
it: `ray start --head` and more `ray start --address` nodes, each with its own temp dir and
its own process group, with token authentication.

    with ray_cluster() as cluster:
        cluster.start_head(num_cpus=0)
        worker = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes(2)
        ... python -m study.run ... --address cluster.address (env: cluster.auth_env) ...
        cluster.kill(worker)                     # the node dies: raylet at once, workers after

Ray 2.6x puts the nodes on the machine's address even when `--node-ip-address 127.0.0.1` is
asked for (the GCS listens on every interface), so token authentication is what keeps this
cluster private. The session folder is short on purpose: Ray's Unix sockets live in it and
their paths may not exceed 107 bytes, which a pytest `tmp_path` easily does. Stopping kills
only these nodes' process groups (`ray stop` would stop every Ray on the machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
from servers import free_port

RAY = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))


def ray_unavailable_reason() -> str | None:
    """Why a multi-node Ray cannot be started here (for pytest.skip), or None."""
    if not Path(RAY).is_file():
        return "the `ray` command is not installed beside this Python"
    return None


class ClusterError(RuntimeError):
    """A node that would not start, or a cluster that did not come up."""


@dataclass
class Node:
    name: str
    process: subprocess.Popen
    temp_dir: Path
    log: Path


class RayCluster:
    def __init__(self, folder: Path | None = None, env: dict[str, str] | None = None):
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.session = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
        self.logs = folder or self.session
        self.auth_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
        self.env = {
            **os.environ, **(env or {}), **self.auth_env,
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1",
        }  # fmt: skip
        self.nodes: list[Node] = []
        self.started = 0  # nodes started, so that a node started again gets a new name

    def _start(self, name: str, args: list[str], num_cpus: float, resources: dict | None) -> Node:
        temp_dir = self.session / name
        temp_dir.mkdir()
        self.started += 1
        log = self.logs / f"ray-{name}.log"
        command = [
            RAY, "start", "--block", "--num-cpus", str(num_cpus), "--disable-usage-stats",
            "--temp-dir", str(temp_dir), *args,
        ]  # fmt: skip
        if resources:
            command += ["--resources", json.dumps(resources)]
        process = subprocess.Popen(
            command, env=self.env, stdout=log.open("w"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        node = Node(name, process, temp_dir, log)
        self.nodes.append(node)
        return node

    def start_head(self, num_cpus: float = 1, resources: dict | None = None) -> Node:
        args = ["--head", "--port", str(self.port), "--include-dashboard", "false"]
        node = self._start("h", args, num_cpus, resources)
        self.wait_for_nodes(1)
        return node

    def add_node(self, num_cpus: float = 1, resources: dict | None = None) -> Node:
        return self._start(f"w{self.started}", ["--address", self.address], num_cpus, resources)

    def start_head_and_workers(self, workers: int, num_cpus: float) -> list[Node]:
        """A head without CPUs (the node a driver attaches to, so that no trial runs beside
        it) and `workers` worker nodes of `num_cpus` each, all up; the worker nodes. One node
        starts at a time, and a node that gives up starting is started again (twice at
        most): a raylet that has not registered within Ray's fixed 30 s exits, which several
        starting together on a busy 2-core machine did, and one alone at a load of 20."""
        self.start_head(num_cpus=0)
        nodes = []
        for count in range(2, workers + 2):
            for tries_left in reversed(range(3)):
                node = self.add_node(num_cpus=num_cpus)
                try:
                    self.wait_for_nodes(count)
                    break
                except ClusterError:
                    if node.process.poll() is None or not tries_left:
                        raise
                    self.nodes.remove(node)
            nodes.append(node)
        return nodes

    def alive_nodes(self) -> dict[str, str]:
        """Node id of each live node, by the temp dir its raylet's socket is in."""
        probe = (
            "import json, ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
            "print(json.dumps({n['NodeID']: n['RayletSocketName'] for n in ray.nodes() "
            "if n['Alive']}))"
        )
        out = subprocess.run(
            [sys.executable, "-c", probe, self.address], env=self.env, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        if out.returncode != 0:
            raise ClusterError(f"cannot list the nodes: {out.stderr[-800:]}")
        try:  # Ray may print a warning of its own on stdout (seen on a busy machine)
            sockets = json.loads(out.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError) as err:
            raise ClusterError(f"cannot read the node list: {out.stdout[-800:]!r}") from err
        return {
            node.name: node_id
            for node_id, socket in sockets.items()
            for node in self.nodes
            if socket.startswith(str(node.temp_dir) + "/")
        }

    def wait_for_nodes(self, count: int, timeout: float = 180) -> dict[str, str]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            for node in self.nodes:
                if node.process.poll() is not None:
                    text = node.log.read_text()[-1500:]
                    raise ClusterError(f"Ray node {node.name} exited while starting: {text}")
            with contextlib.suppress(ClusterError, subprocess.TimeoutExpired):
                alive = self.alive_nodes()
                if len(alive) >= count:
                    return alive
            time.sleep(2)
        raise ClusterError(f"the {count}-node Ray cluster did not come up in {timeout:.0f} s")

    def kill(self, node: Node) -> None:
        """The node dies: SIGKILL to its process group, the raylet and the node's own services
        at once. Ray gives each worker a process group of its own; those die as they find their
        raylet gone (1.6 s here), as a crashed raylet's workers do."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.process.pid, signal.SIGKILL)
        node.process.wait(timeout=30)

    def stop(self, grace_s: float = 5) -> None:
        """SIGTERM to every node, then SIGKILL to what still runs after `grace_s` in all: a
        `ray start --block` node can take 15 s and more to end on SIGTERM, and these nodes
        and their session folder are thrown away."""
        for node in self.nodes:
            if node.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for node in self.nodes:
            try:
                node.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.process.pid, signal.SIGKILL)
                node.process.wait(timeout=30)
        shutil.rmtree(self.session, ignore_errors=True)


@contextlib.contextmanager
def ray_cluster(
    folder: Path | None = None, env: dict[str, str] | None = None
) -> Iterator[RayCluster]:
    cluster = RayCluster(folder, env)
    try:
        yield cluster
    finally:
        cluster.stop()


@contextlib.contextmanager
def head_and_worker(
    folder: Path, worker_cpus: float = 1
) -> Iterator[tuple[RayCluster, Node, dict[str, str]]]:
    """For tests: a head of one CPU (the node a driver attaches to) and one worker node, both
    up, with each node's id by name. pytest skips where the `ray` command is missing and
    fails where the nodes do not come up."""
    import pytest

    if ray_unavailable_reason():
        pytest.skip(ray_unavailable_reason())
    with ray_cluster(folder) as cluster:
        try:
            cluster.start_head(num_cpus=1)
            worker = cluster.add_node(num_cpus=worker_cpus)
            node_ids = cluster.wait_for_nodes(2)
        except ClusterError as err:
            pytest.fail(str(err))
        yield cluster, worker, node_ids


def kill_session(session: int) -> None:
    """Whatever the killed driver started that outlived it, and nothing else: `ray stop` would
    also stop every other Ray on this machine."""
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getsid(proc.pid) == session:
                proc.kill()
