"""`mlflow server` on loopback, for tests and benchmarks that need a tracking server:

    with mlflow_ui_server("sqlite:///.../mlflow.db") as base_url:
        ...

`mlflow_ui_server` starts `mlflow server` on 127.0.0.1 (a free port) in its own process group,
waits for `/health`, and kills the whole group on exit; `server_api` calls its REST API. Both go
straight to loopback, whatever proxy the environment names. (The browser that looks at the
server's UI is tests/mlflow_ui.py.) A test that crashes the server mid-study takes the
`MlflowServer` itself:

    with mlflow_server(backend) as server:
        server.kill(); server.start()   # SIGKILL, then back on the same port and store
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from servers import free_port  # bench/servers.py

# Straight to the local server, whatever proxy the environment names.
LOOPBACK_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def wait_answering(proc: subprocess.Popen, url: str, log_path: Path, timeout: float) -> None:
    """Wait until `url` answers HTTP 200 (a server started in `proc`, logging to `log_path`);
    fails with the log's tail if the server exits first or is still silent after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the server exited with {proc.returncode} before it answered:\n" + _tail(log_path)
            )
        try:
            with LOOPBACK_OPENER.open(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer in {timeout:.0f}s:\n" + _tail(log_path))
        time.sleep(0.25)


def stop_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the process group `proc` leads (started with `start_new_session`: a server's
    CLI and its uvicorn workers), then SIGKILL what is left."""
    if proc.poll() is None or _group_alive(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (proc.poll() is None or _group_alive(proc.pid)):
            time.sleep(0.1)
        if proc.poll() is None or _group_alive(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=grace)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class MlflowServer:
    """`mlflow server` on `backend_store_uri`, on one loopback port for its whole life: `kill`
    ends it at once (SIGKILL to its process group, as a crashed or preempted server ends) and
    `start` brings it back on the same port, database and artifact root, so that a client
    holding the URL sees a server that restarted."""

    def __init__(
        self,
        backend_store_uri: str,
        work: Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout: float = 180.0,
    ):
        if host not in ("127.0.0.1", "localhost"):
            raise ValueError(f"only a loopback host is allowed, not {host!r}")
        self.backend_store_uri = backend_store_uri
        self.work = work
        self.port = port or free_port()
        self.url = f"http://{host}:{self.port}"
        self.log_path = work / "mlflow-server.log"
        self.startup_timeout = startup_timeout
        self.starts = 0  # how often it was started: a restarted server appends to its log
        self._host = host
        self._proc: subprocess.Popen | None = None

    def start(self) -> None:
        """Start the server and wait until `/health` answers."""
        self.work.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable, "-m", "mlflow", "server",
            "--backend-store-uri", self.backend_store_uri,
            "--default-artifact-root", (self.work / "artifacts").as_uri(),
            "--host", self._host, "--port", str(self.port), "--workers", "1",
        ]  # fmt: skip
        env = {
            **os.environ,
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "DO_NOT_TRACK": "true",
            "PYTHONUNBUFFERED": "1",
        }
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                cmd,
                cwd=self.work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1
        wait_answering(self._proc, f"{self.url}/health", self.log_path, self.startup_timeout)

    def kill(self) -> None:
        """SIGKILL the whole process group, with no chance to finish a request or a commit."""
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(timeout=30)
            _wait_group_gone(self._proc.pid)
            self._proc = None

    def stop(self) -> None:
        """SIGTERM the group, then SIGKILL what is left."""
        if self._proc is not None:
            stop_group(self._proc)
            self._proc = None


def _wait_group_gone(pgid: int, timeout: float = 30.0) -> None:
    """The uvicorn child may outlive the CLI by a moment; its port is free once it is gone."""
    deadline = time.monotonic() + timeout
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


@contextlib.contextmanager
def mlflow_server(
    backend_store_uri: str,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    startup_timeout: float = 180.0,
    workdir: str | Path | None = None,
) -> Iterator[MlflowServer]:
    """A started `MlflowServer` (which a test may `kill` and `start` again), stopped on exit.

    The server runs in `workdir` (a temporary folder by default, which also holds its log and
    default artifact root), with telemetry and the job runner off, in a new session so that
    the whole process group is killed on exit.
    """
    own_dir = workdir is None
    work = Path(tempfile.mkdtemp(prefix="mlflow-ui-")) if own_dir else Path(workdir)
    server = None
    try:
        server = MlflowServer(
            backend_store_uri, work, host=host, port=port, startup_timeout=startup_timeout
        )
        server.start()
        yield server
    finally:
        if server is not None:
            server.stop()
        if own_dir:
            shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def mlflow_ui_server(backend_store_uri: str, **options) -> Iterator[str]:
    """Run `mlflow server` on `backend_store_uri` (options as `mlflow_server`); yields its
    base URL ("http://127.0.0.1:N")."""
    with mlflow_server(backend_store_uri, **options) as server:
        yield server.url


def server_api(base_url: str, path: str, body: dict | None = None) -> dict:
    """POST `body` (or GET without one) to the server's REST API at `path`; the JSON answer."""
    url = f"{base_url}/api/2.0/mlflow/{path}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with LOOPBACK_OPENER.open(req, timeout=30) as resp:
        return json.load(resp)
