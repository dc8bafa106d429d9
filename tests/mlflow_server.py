"""`mlflow server` on loopback, for tests and benchmarks that need a tracking server:

    with mlflow_ui_server("sqlite:///.../mlflow.db") as base_url:
        ...

`mlflow_ui_server` starts `mlflow server` on 127.0.0.1 (a free port) in its own process group,
waits for `/health`, and kills the whole group on exit; `server_api` calls its REST API. Both go
straight to loopback, whatever proxy the environment names. (The browser that looks at the
server's UI is tests/mlflow_ui.py.)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

# Straight to the local server, whatever proxy the environment names.
LOOPBACK_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _stop_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the server's process group (the CLI and its uvicorn child), then SIGKILL."""
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


@contextlib.contextmanager
def mlflow_ui_server(
    backend_store_uri: str,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    startup_timeout: float = 180.0,
    workdir: str | Path | None = None,
) -> Iterator[str]:
    """Run `mlflow server` on `backend_store_uri`; yields its base URL ("http://127.0.0.1:N").

    The server runs in `workdir` (a temporary folder by default, which also holds its log and
    default artifact root), with telemetry and the job runner off, in a new session so that
    the whole process group is killed on exit.
    """
    if host not in ("127.0.0.1", "localhost"):
        raise ValueError(f"only a loopback host is allowed, not {host!r}")
    own_dir = workdir is None
    work = Path(tempfile.mkdtemp(prefix="mlflow-ui-")) if own_dir else Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    port = port or _free_port(host)
    log_path = work / "mlflow-server.log"
    cmd = [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", backend_store_uri,
        "--default-artifact-root", (work / "artifacts").as_uri(),
        "--host", host, "--port", str(port), "--workers", "1",
    ]  # fmt: skip
    env = {
        **os.environ,
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
        "PYTHONUNBUFFERED": "1",
    }
    base_url = f"http://{host}:{port}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"mlflow server exited with {proc.returncode} before it was up:\n"
                    + _tail(log_path)
                )
            try:
                with LOOPBACK_OPENER.open(f"{base_url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"mlflow server not healthy after {startup_timeout:.0f}s:\n" + _tail(log_path)
                )
            time.sleep(0.25)
        yield base_url
    finally:
        _stop_group(proc)
        if own_dir:
            shutil.rmtree(work, ignore_errors=True)


def server_api(base_url: str, path: str, body: dict | None = None) -> dict:
    """POST `body` (or GET without one) to the server's REST API at `path`; the JSON answer."""
    url = f"{base_url}/api/2.0/mlflow/{path}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with LOOPBACK_OPENER.open(req, timeout=30) as resp:
        return json.load(resp)
