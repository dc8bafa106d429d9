"""Storage, tracking and Optuna URIs, `--resume` and `--max-concurrent` through `python -m
study.run` (run by the command server, tests/study/fuzz/harness.py) on a synthetic study (no
model, no data), stopped where it would start tracking and Ray, once every check before its
first write has passed. Each case passes the checks, or is refused with exactly one line on
stderr that names what it refuses, having written nothing anywhere under the temporary root:
no MLflow store, no Ray results folder, no Optuna database, no lock. Servers are only ever
looked for on 127.0.0.1, at a closed port."""

from __future__ import annotations

import os
import re
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st
from servers import free_port  # bench/servers.py: a port nothing listens on

from tests.study.fuzz.harness import CommandServer, check_outcome, fuzz_settings
from tests.study.fuzz.strategies import long_strings
from trainables.errors import joined

PORT = free_port()
PATH_MAX = os.pathconf("/", "PC_PATH_MAX")
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


SYNTHETIC = ["trainable=synthetic", "model=null", "data=null"]
# how a refusal names the option it refuses (the tracking URI also as "MLflow tracking ...")
FLAGS = {
    "--tracking-uri": r"--tracking-uri|MLflow tracking (URI|server)",
    "--storage": r"(?<![\w-])--storage(?![\w-])",
    "--optuna-storage": r"--optuna-storage",
    "--resume": r"--resume",
    "--max-concurrent": r"--max-concurrent",
}
SHOWS_VALUE = ("--storage", "--optuna-storage", "--max-concurrent")


def uri_argv(tracking_uri, storage_uri, optuna_url, resume, max_concurrent) -> list[str]:
    """The command line of a case (`--OPTION=VALUE`: a value may start with '-')."""
    argv = ["smoke", "--profile", "smoke", *(f"--set={text}" for text in SYNTHETIC)]
    argv.append(f"--storage={storage_uri}")
    for flag, value in (("--tracking-uri", tracking_uri), ("--optuna-storage", optuna_url),
                        ("--max-concurrent", max_concurrent)):  # fmt: skip
        if value is not None:
            argv.append(f"{flag}={value}")
    return [*argv, *(["--resume"] if resume else [])]


def names(line: str, flag: str, value: object, cwd: Path) -> bool:
    """Whether `line` names the option `flag`, and for a storage or a count the value given
    or the folder it stands for, as a line shows it (`joined`: its line breaks one space,
    control characters escaped)."""
    if not re.search(FLAGS[flag], line):
        return False
    if flag not in SHOWS_VALUE:
        return True
    text = str(value)
    shown = {joined(text), joined(os.path.abspath(cwd / os.path.expanduser(text)))}
    return any(form in line for form in shown)


def check_uris(server: CommandServer, *options) -> None:
    tracking_uri, storage_uri, optuna_url, resume, max_concurrent = options
    with server.case_folder() as folder:
        outcome = server.run("study.run", uri_argv(*options), folder, stop_at="start")
    # a run that passes the checks goes on to write (its storage folder); a refused one not
    line = check_outcome(outcome, writes_on_success=True)
    if line is None:
        return
    given = [("--tracking-uri", tracking_uri), ("--storage", storage_uri),
             ("--optuna-storage", optuna_url), ("--max-concurrent", max_concurrent),
             ("--resume", True if resume else None)]  # fmt: skip
    named = [names(line, flag, value, folder) for flag, value in given if value is not None]
    assert any(named), (
        f"the refusal names none of the options given ({uri_argv(*options)}): {line!r}"
    )


@fuzz_settings(0.05)
@given(tracking, storage, optuna, st.booleans(), st.none() | st.integers(-2, 4))
@example("sqlite:///no/such/folder/x.db", "ray_results", None, False, None)
@example(None, "a" * 300, None, False, None)  # a name longer than the file system takes
def test_uris(study_command, tracking_uri, storage_uri, optuna_url, resume, max_concurrent):
    check_uris(study_command, tracking_uri, storage_uri, optuna_url, resume, max_concurrent)


def test_a_storage_too_deep_for_its_write_probe_is_refused_leaving_nothing(study_command):
    """Found by the fuzz above while it shrank another case: the folder fits PATH_MAX but its
    write probe does not. StudyStore.check_writable refused it in one line but left the
    thousands of folders it had made for it; it removes them now, also when the probe fails."""
    with study_command.case_folder() as folder:
        # `x/` a level: the folder ends 10 to 20 bytes short of PATH_MAX, its probe file past it
        depth = (PATH_MAX - 1 - len(os.fsencode(folder)) - 10) // 2
        argv = uri_argv(None, "x/" * depth, None, False, None)
        outcome = study_command.run("study.run", argv, folder, stop_at="start")
    assert outcome.code == 2, outcome
    check_outcome(outcome)


def test_an_unreachable_server_is_one_line_naming_it(study_command):
    """What `check_uris` counts as refused: one `error:` line, naming the server."""
    for fork in (True, False):
        with study_command.case_folder() as folder:
            argv = uri_argv(f"http://127.0.0.1:{PORT}", "ray_results", None, False, None)
            outcome = study_command.run("study.run", argv, folder, stop_at="start", fork=fork)
        assert outcome.code == 2
        assert f"127.0.0.1:{PORT}" in check_outcome(outcome)
