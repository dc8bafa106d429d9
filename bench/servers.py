"""The servers a cluster user deploys, started for real on 127.0.0.1 by the tests that need them.

    with s3_server() as s3:                 # moto's S3-compatible server, in this process
        s3.create_bucket("runs"); ...; s3.stop(); ...; s3.start()
    with postgres_cluster() as pg:          # a throwaway PostgreSQL cluster
        url = pg.create_database("mlflow", "tracker", "secret")
        with mlflow_ui_server(url) as base_url: ...   # bench/mlflow_server.py

Each yields once its server answers and stops it on exit, however the test ends; ports are
free ones on loopback, found when the server starts.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

S3_ENV = {  # what a client of the local S3 server needs: any key, a region, no cloud lookups
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def s3_unavailable_reason() -> str | None:
    """Why the S3 tests cannot run here (for pytest.skip), or None when they can."""
    try:
        import moto.server  # noqa: F401
    except ImportError as err:
        return f"moto's server mode is not installed (pip install 'moto[server]'): {err}"
    return None


class S3Server:
    """moto's S3-compatible server on 127.0.0.1, served from a thread of this process.

    `stop` closes its port, so clients are refused as by a storage server that went away;
    `start` opens the same port again with the buckets and objects as they were (moto keeps
    them in this process), as a real object store comes back with its data."""

    def __init__(self, port: int | None = None):
        from moto.server import DomainDispatcherApplication, create_backend_app

        self.port = port or free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.endpoint}"
        self._app = DomainDispatcherApplication(create_backend_app)
        self._server = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        from moto.server import MotoRequestHandler
        from werkzeug.serving import make_server

        quiet = type("QuietHandler", (MotoRequestHandler,), {"log_request": _no_log})
        self._server = make_server(
            "127.0.0.1", self.port, self._app, threaded=True, request_handler=quiet
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._server is not None

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=30)
            self._server = None

    def reset(self) -> None:
        """Drop every bucket (moto's state is shared by all servers of this process)."""
        request = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30)

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name=S3_ENV["AWS_DEFAULT_REGION"],
            aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"],
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        )
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def uri(self, bucket: str, path: str = "") -> str:
        """The storage URI with the endpoint in its query, as pyarrow documents it."""
        where = f"{bucket}/{path}".rstrip("/")
        return f"s3://{where}?endpoint_override={self.endpoint}&scheme=http"


def _no_log(*args, **kwargs) -> None:
    """Each request would be a line on the test's stderr."""


@contextlib.contextmanager
def s3_server() -> Iterator[S3Server]:
    server = S3Server()
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(OSError):
            if not server.running:
                server.start()  # to drop what the test stored
            server.reset()
        server.stop()


def postgres_bin() -> Path | None:
    """The folder of PostgreSQL's server programs: on PATH, else Debian's newest version."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version)
    return Path(versions[-1]).parent if versions else None


def _version(path: str) -> tuple[int, ...]:
    return tuple(int(p) for p in Path(path).parts[-3].split(".") if p.isdigit())


def postgres_unavailable_reason() -> str | None:
    """Why the PostgreSQL tests cannot run here (for pytest.skip), or None when they can."""
    if postgres_bin() is None:
        return "PostgreSQL's server is not installed (apt-get install postgresql)"
    try:
        import psycopg  # noqa: F401  (SQLAlchemy 2.1's driver for postgresql:// URIs)
    except ImportError:
        return "the PostgreSQL driver is not installed (pip install 'psycopg[binary]')"
    if os.geteuid() == 0 and _server_user() is None:
        return "running as root and no 'postgres' or 'nobody' user to run PostgreSQL as"
    return None


def _server_user() -> pwd.struct_passwd | None:
    """PostgreSQL refuses to run as root: then it runs as Debian's `postgres` user (or
    `nobody`) through `runuser`; any other user runs it as itself."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    return None


class PostgresCluster:
    """A throwaway PostgreSQL cluster: its data, socket and log in a fresh temporary folder,
    listening on 127.0.0.1 only, a password needed for every TCP login (scram-sha-256)."""

    SUPERUSER = "admin"

    def __init__(self, password: str = "admin-secret"):
        self.bin = postgres_bin()
        self.password = password
        self.port = free_port()
        # not under pytest's own temporary folder: that is private to the test's user
        self.folder = Path(tempfile.mkdtemp(prefix="pg-"))
        self.data, self.log = self.folder / "data", self.folder / "server.log"
        self._user = _server_user()
        if self._user is not None:
            os.chown(self.folder, self._user.pw_uid, self._user.pw_gid)

    def _run(self, program: str, *args: str, timeout: float = 120) -> None:
        command = [str(self.bin / program), *args]
        if self._user is not None:
            command = ["runuser", "-u", self._user.pw_name, "--", *command]
        done = subprocess.run(
            command, cwd=self.folder, capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed: {done.stderr[-2000:]}\n{_tail(self.log)}")

    def initdb(self) -> None:
        secret = self.folder / "pw"
        secret.write_text(self.password + "\n")
        if self._user is not None:
            os.chown(secret, self._user.pw_uid, self._user.pw_gid)
        self._run(
            "initdb", "-D", str(self.data), "-U", self.SUPERUSER, f"--pwfile={secret}",
            "--auth=scram-sha-256", "--no-sync", "-E", "UTF8", "--locale=C",
        )  # fmt: skip
        secret.unlink()

    def start(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder} -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def url(self, database: str, user: str = SUPERUSER, password: str | None = None) -> str:
        password = self.password if password is None else password
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{database}"

    def execute(self, *statements: str) -> None:
        """Run SQL as the superuser (outside a transaction: CREATE DATABASE needs that)."""
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True, connect_timeout=10) as db:
            for statement in statements:
                db.execute(statement)

    def create_database(self, name: str, owner: str, password: str) -> str:
        """A database owned by a new login role; its URL, as MLflow takes it."""
        self.execute(
            f"CREATE ROLE {owner} LOGIN PASSWORD '{password}'",
            f"CREATE DATABASE {name} OWNER {owner}",
        )
        return self.url(name, owner, password)


@contextlib.contextmanager
def postgres_cluster() -> Iterator[PostgresCluster]:
    cluster = PostgresCluster()
    try:
        cluster.initdb()
        cluster.start()
        yield cluster
    finally:
        _stop_postgres(cluster)
        shutil.rmtree(cluster.folder, ignore_errors=True)


def _stop_postgres(cluster: PostgresCluster) -> None:
    """`pg_ctl stop`, and if that fails, the server's own processes by the pid it wrote."""
    if not cluster.running():
        return
    with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
        cluster.stop("immediate")
        return
    with contextlib.suppress(OSError, ValueError):
        pid = int((cluster.data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, 9)
        time.sleep(1)


def _tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""
