"""Refuse a tracking store that cannot be used, in seconds and before anything is written.

A sqlite URI naming a file that exists but is no SQLite database (a text file, a folder, a
FIFO) is refused from the file's first 16 bytes, without MLflow, which would retry it for two
minutes. Two ways a store that looks fine is not, both seen against PostgreSQL:
- a database URI given as `--tracking-uri` whose database refuses the login: MLflow's own
  store retries a failed connection ten times over about two minutes, with a warning each time,
  before it gives up; one connection attempt says the same at once;
- an MLflow server that answers `/health` (which never touches its database) while its
  database refuses it: every API request then waits while the server retries the connection,
  and ends in an HTTP 500 that does not say why. One small request shows it.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

from study.folder_names import folder_problem
from study.tracking.mlflow_internals import DATABASE_ENGINES, SQLITE
from trainables.errors import UserInputError, first_line
from trainables.input_files import open_regular

CONNECT_TIMEOUT_S = 10
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file
MAX_SQLITE_BYTES = 2**50  # a tracking store may be as large as the disk; only its header is read


def shown_uri(uri: str) -> str:
    """The URI as it may be printed or logged: a password in it is replaced by ***."""
    parts = urllib.parse.urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def database_kind(uri: str) -> str | None:
    """'postgresql', 'mysql', 'mssql' or 'sqlite' for a database URI (a driver may follow a
    '+'), else None."""
    kind = urllib.parse.urlsplit(uri).scheme.partition("+")[0]
    return kind if kind in DATABASE_ENGINES else None


def probe_database(uri: str) -> None:
    """One connection to a database server, no retries; a sqlite file only looked at (sqlite
    files are MLflow's to make)."""
    kind = database_kind(uri)
    if kind == SQLITE:
        probe_sqlite_file(uri)
    if kind is None or kind == SQLITE:
        return
    import sqlalchemy

    timeout = {"connect_timeout": CONNECT_TIMEOUT_S} if kind in ("postgresql", "mysql") else {}
    try:
        engine = sqlalchemy.create_engine(uri, connect_args=timeout, poolclass=sqlalchemy.NullPool)
        with engine.connect():
            pass
    except Exception as err:  # noqa: BLE001 - a missing driver, a refused login, no server
        cause = getattr(err, "orig", None) or err
        raise UserInputError(
            f"MLflow tracking URI {shown_uri(uri)} cannot be used: the database says "
            f"{type(cause).__name__}: {first_line(cause)}"
        ) from err


def sqlite_file(uri: str) -> str | None:
    """The file a sqlite URI names (`sqlite:///mlflow.db`: mlflow.db in the working folder,
    `sqlite:////abs/m.db`: /abs/m.db); None for an in-memory database or a `file:` URI."""
    from sqlalchemy.engine import make_url

    try:
        database = make_url(uri).database
    except Exception:  # noqa: BLE001 - a URI SQLAlchemy cannot parse: MLflow says why
        return None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return database


def probe_sqlite_file(uri: str) -> None:
    """A sqlite URI whose file exists must name a regular file that is a SQLite database (its
    16-byte header) or is empty; MLflow would otherwise retry it for two minutes, with a
    warning each time, after Ray has started. Only the header is read: a FIFO or a device is
    refused before it is opened (trainables/input_files.py)."""
    path = sqlite_file(uri)
    if path is None:
        return
    where = f"MLflow tracking URI {shown_uri(uri)}: {path}"
    if not os.path.exists(os.path.expanduser(path)):
        _check_folder(uri, path, where)
        return  # MLflow makes a new database there
    try:
        with open_regular(os.path.expanduser(path), where, what="an SQLite database",
                          max_bytes=MAX_SQLITE_BYTES) as handle:  # fmt: skip
            header = handle.read(len(SQLITE_HEADER))
    except OSError as err:
        raise UserInputError(f"{where}: cannot read it: {err.strerror or err}") from None
    if header and header != SQLITE_HEADER:
        raise UserInputError(
            f"{where} is not an SQLite database (its first bytes are not {SQLITE_HEADER!r}); "
            "name a new file for MLflow to make, or an MLflow sqlite store"
        )


def _check_folder(uri: str, path: str, where: str) -> None:
    """A new database's folder must exist, as --optuna-storage's must: MLflow would make any
    missing folders, so a mistyped path would take the study's record somewhere unseen. The
    default store's folder, outputs/, is the study's own to make."""
    from study.names import default_tracking_uri

    folder = Path(os.path.abspath(os.path.expanduser(path))).parent
    outputs = Path(sqlite_file(default_tracking_uri()) or "").parent
    problem = None if folder == outputs else folder_problem(folder)
    if problem:
        first = " (make it first)" if not folder.exists() else ""
        raise UserInputError(f"{where}: {folder} {problem}{first}; name a file in a folder "
                             "that exists")  # fmt: skip


def probe_server_store(uri: str) -> None:
    """One API request that reads the server's store (the driver's own MLflow settings apply:
    its request timeout, no retries, any credentials in the environment)."""
    from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_TIMEOUT
    from mlflow.tracking import MlflowClient

    try:
        MlflowClient(uri).search_experiments(max_results=1)
    except Exception as err:  # noqa: BLE001 - whatever the server or its store answered
        reason = first_line(err).split(" Response body:")[0]
        if "timed out" in reason:  # the server is retrying its database meanwhile
            reason = f"no answer in {MLFLOW_HTTP_REQUEST_TIMEOUT.get()} s"
        raise UserInputError(
            f"MLflow tracking server {uri} answers but cannot use its store ({reason}); "
            "see the server's log: its database may be down or refuse the login"
        ) from err
