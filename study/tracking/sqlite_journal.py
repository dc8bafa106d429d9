"""A sqlite tracking store in write-ahead-log mode, so a write does not wait for the disk.

MLflow's store commits several times per `log_batch`, and in sqlite's default mode each
commit of a change waits for fsync: on a busy disk that was most of the driver's time per
result (bench/scale.py: 47 ms per result at 600 trials, 69 of 435 driver seconds in
`commit`). In WAL mode with `synchronous=NORMAL` a commit appends to the log and returns; the
log is synced at checkpoints. The store stays consistent whatever happens, and a committed
write survives the driver being killed; only an operating-system crash or power loss can
undo the last commits before the next checkpoint (the study then resumes from Ray's state
and writes again what its trials report after their checkpoints). WAL needs every reader on
the same host, as a sqlite file always should be: on a shared file system, use a tracking
server.

The mode is set by a SQLAlchemy `connect` listener, only for the database files registered
here (MLflow makes its engine itself), and persists in the file. In WAL mode sqlite keeps
`mlflow.db-wal` and `mlflow.db-shm` beside the file while any connection is open, and the
last one to close folds the log into the database and removes both: a command that exits
with its pooled connections open leaves them behind (a 4 MB `-wal` after a smoke study), so
each command closes them as it returns (`close_sqlite_stores`).
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine

_files: set[str] = set()
_lock = threading.Lock()
_listening = False
_engines: weakref.WeakSet[Engine] = weakref.WeakSet()  # every sqlite engine this process used


@event.listens_for(Engine, "engine_connect")
def _remember_sqlite(connection) -> None:
    if connection.engine.dialect.name == "sqlite":
        _engines.add(connection.engine)


def close_sqlite_stores() -> None:
    """Close the pooled connections of every sqlite engine this process used (the MLflow
    store, Optuna's storage), so that the last close checkpoints the write-ahead log and
    removes `-wal` and `-shm`. The engines stay usable: a later use connects again."""
    for engine in list(_engines):
        engine.dispose()


def write_ahead(tracking_uri: str) -> None:
    """Put the sqlite store of `tracking_uri` (a `sqlite:///` URI) in WAL mode for every
    connection this process opens to it; any other URI is left alone."""
    global _listening
    if not tracking_uri.startswith("sqlite:///"):
        return
    with _lock:
        _files.add(str(Path(tracking_uri.removeprefix("sqlite:///")).resolve()))
        if not _listening:
            event.listen(Engine, "connect", _on_connect)
            _listening = True


def _on_connect(connection, _record) -> None:
    if not isinstance(connection, sqlite3.Connection) or not _files:
        return
    rows = connection.execute("PRAGMA database_list").fetchall()
    main = next((row[2] for row in rows if row[1] == "main"), "")
    if main and str(Path(main).resolve()) in _files:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
