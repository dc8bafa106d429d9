"""Storage, tracking and Optuna URIs as `python -m study.run` checks them before it writes
anything (`_check_before_writing`, on a synthetic study: no model, no data). Each case passes the
checks, or is refused in one line and has written nothing: no MLflow store, no Ray results
folder, no Optuna database. Servers are only ever looked for on 127.0.0.1, at a closed port."""

from __future__ import annotations

import argparse
import contextlib
import socket

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from study.run import _check_before_writing
from study.spec import load_study
from tests.study.fuzz.harness import (
    case_folder,
    check_outcome,
    files_under,
    fuzz_settings,
    run_entry,
    user_error_outcome,
)
from tests.study.fuzz.strategies import long_strings

SYNTHETIC = ["trainable=synthetic", "model=null", "data=null"]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


PORT = _closed_port()
# a command-line argument holds no NUL character (the C strings of argv cannot)
LOCAL_TEXT = st.text(st.characters(exclude_characters="\x00"), max_size=20).filter(
    lambda t: "://" not in t
)
paths = st.one_of(
    st.sampled_from(["x.db", "sub/x.db", "no/such/folder/x.db", "", ".", "..", "~", " ", "a b"]),
    long_strings,
    LOCAL_TEXT,
)
tracking = st.one_of(
    st.none(),
    paths.map("sqlite:///{}".format),
    paths.map("file:{}".format),
    st.sampled_from([
        f"http://127.0.0.1:{PORT}", f"https://127.0.0.1:{PORT}/", f"http://[::1]:{PORT}",
        f"postgresql://user@127.0.0.1:{PORT}/db", f"mysql://u:p@127.0.0.1:{PORT}/db",
        "sqlite://", "sqlite:", "mssql://", "databricks", "http://", "https://:0",
        f"postgresql+psycopg://127.0.0.1:{PORT}/db",
    ]),
    LOCAL_TEXT,
)  # fmt: skip
storage = st.one_of(
    paths,
    paths.map("file://{}".format),
    st.sampled_from(["foo://bar", "ray_results", "memory://x", "file://", "s3:/x"]),
)
optuna = st.one_of(
    st.none(),
    st.just("none"),
    paths.map("sqlite:///{}".format),
    st.sampled_from([f"postgresql://u@127.0.0.1:{PORT}/db", "mysql://", "not a url", ""]),
    LOCAL_TEXT,
)


@pytest.fixture(scope="module")
def synthetic_spec():
    return load_study("smoke", "smoke", overrides=SYNTHETIC)


def check_uris(spec, tracking_uri, storage_uri, optuna_url, resume, max_concurrent) -> None:
    args = argparse.Namespace(
        tracking_uri=tracking_uri, storage=storage_uri, optuna_storage=optuna_url,
        resume=resume, max_concurrent=max_concurrent, address=None, overrides=[],
        profile="smoke", reports="none", wait=False,
    )  # fmt: skip
    with case_folder() as folder:
        before = files_under(folder)
        with contextlib.ExitStack() as held:  # what the driver holds (its lock) is let go
            code = user_error_outcome(lambda: _check_before_writing(args, spec, held))
        written = files_under(folder) - before
    # a run that passes the checks goes on to write (its storage folder); a refused one not
    assert code == 0 or not written, f"refused, yet wrote {sorted(written)}"


@fuzz_settings(0.05)
@given(tracking, storage, optuna, st.booleans(), st.none() | st.integers(-2, 4))
@example("sqlite:///no/such/folder/x.db", "ray_results", None, False, None)
@example(None, "a" * 300, None, False, None)  # a name longer than the file system takes
def test_uris(synthetic_spec, tracking_uri, storage_uri, optuna_url, resume, max_concurrent):
    check_uris(synthetic_spec, tracking_uri, storage_uri, optuna_url, resume, max_concurrent)


def test_the_refusal_is_one_line(synthetic_spec):
    """What `check_uris` counts as refused reaches the terminal as one `error:` line."""
    args = argparse.Namespace(
        tracking_uri=f"http://127.0.0.1:{PORT}", storage="ray_results", optuna_storage=None,
        resume=False, max_concurrent=None, address=None, overrides=[], profile="smoke",
        reports="none", wait=False,
    )  # fmt: skip
    with case_folder() as folder, contextlib.ExitStack() as held:
        outcome = run_entry(
            lambda: user_error_outcome(lambda: _check_before_writing(args, synthetic_spec, held)),
            folder,
        )
    check_outcome(outcome)
    assert outcome.code == 2
