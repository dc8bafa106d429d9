"""The command servers the fuzz tests share (tests/study/fuzz/harness.py): one for
`python -m study.run` and one for `python -m trainables`, each started once a session, when a
test first asks for it, in a temporary root of its own."""

from __future__ import annotations

import pytest

from tests.study.fuzz.harness import FORK_EVERY, CommandServer


def _server(tmp_path_factory, module: str, name: str):
    root = tmp_path_factory.mktemp(name) / "root"
    server = CommandServer((module,), root, fork_every=FORK_EVERY)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def study_command(tmp_path_factory):
    """`python -m study.run`, its imports done once."""
    yield from _server(tmp_path_factory, "study.run", "fuzz-study")


@pytest.fixture(scope="session")
def trial_command(tmp_path_factory):
    """`python -m trainables`, its imports (torch's among them) done once."""
    yield from _server(tmp_path_factory, "trainables.__main__", "fuzz-trial")
