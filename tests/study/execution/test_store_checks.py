"""The driver's checks of its stores, without a server: which errors mean object storage did
not answer, and how a tracking URI is shown and classified."""

from __future__ import annotations

import pytest

from study.execution.storage_outage import (
    StorageUnreachable,
    is_storage_unreachable,
    unreachable_line,
    unreachable_reason,
)
from study.tracking.probe import database_kind, probe_database, shown_uri
from trainables.errors import UserInputError

REFUSED = (
    "When getting information for key 'ray/x/.validate_storage_marker' in bucket 'runs': "
    "AWS Error NETWORK_CONNECTION during HeadObject operation: curlCode: 7, Could not connect "
    "to server"
)


def test_an_unanswered_storage_request_is_recognised_through_its_causes():
    try:
        try:
            raise OSError(REFUSED)
        except OSError as inner:
            raise RuntimeError("Trial task failed") from inner
    except RuntimeError as outer:
        assert is_storage_unreachable(outer)
        assert unreachable_reason(outer).startswith("AWS Error NETWORK_CONNECTION during Head")
    assert is_storage_unreachable(StorageUnreachable("x"))
    assert unreachable_line(f"Traceback\n  line\n{REFUSED}\n") == REFUSED[REFUSED.index("AWS") :]
    for other in ("No space left on device", "Bucket 'x' not found", "loss is NaN"):
        assert not is_storage_unreachable(OSError(other))
    assert not is_storage_unreachable(None)


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("postgresql://u:secret@db:5432/m", "postgresql://u:***@db:5432/m"),
        ("postgresql+psycopg://u:p%40ss@db/m", "postgresql+psycopg://u:***@db/m"),
        ("postgresql://u@db/m", "postgresql://u@db/m"),
        ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
        ("sqlite:////tmp/mlflow.db", "sqlite:////tmp/mlflow.db"),
    ],
)
def test_a_password_in_a_tracking_uri_is_never_shown(uri, shown):
    assert shown_uri(uri) == shown


def test_database_uris_are_told_from_the_rest(tmp_path):
    assert database_kind("postgresql+psycopg://u@h/d") == "postgresql"
    assert database_kind("mysql://u@h/d") == "mysql"
    assert database_kind("sqlite:///x.db") == "sqlite"
    assert database_kind("http://h:5000") is None and database_kind("file:///x") is None
    probe_database(f"sqlite:///{tmp_path}/mlflow.db")  # a new file: MLflow's own to create
    # but not its folder: a mistyped path would take the study's record somewhere unseen
    with pytest.raises(UserInputError, match="/nonexistent/folder does not exist"):
        probe_database("sqlite:////nonexistent/folder/mlflow.db")
