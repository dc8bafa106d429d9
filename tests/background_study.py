"""The default tier's one whole study, started in the background as pytest starts (or, when
the command line could deselect it, as soon as collection ends) and waited for by its test,
which runs last.

The smoke study is mostly waiting (Ray starting, trials two at a time, the report) while the
other ~1,400 tests of the default tier run in the pytest process; run one after the other they
took about 110 s + 190 s on the 2-core machine. Overlapped, the tier's wall time is about the
longer of the two. The study is the same command, in the same empty folder, with the same
checks: only when it starts changes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression  # the -m language, as pytest evaluates it

SMOKE_NODE = "tests/study/test_smoke_study.py::test_the_smoke_profile_runs_end_to_end"
# tests that read the finished study's folder, run after the smoke test, which checks that
# the study left nothing there but its outputs
AFTER_SMOKE = ("tests/test_documented_commands.py::test_commands_against_the_smoke_store",)
MARKS = {"study", "smoke"}  # the smoke test's markers, for the -m expression
SMOKE_COMMAND = ("-m", "study.run", "ner_depth", "--profile", "smoke", "--num-cpus", "2")
_KEY = pytest.StashKey["BackgroundStudy"]()


class BackgroundStudy:
    """`python -m study.run ner_depth --profile smoke` in a fresh folder, its output in files
    there (a pipe nobody reads for minutes would fill and stall the study)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="smoke-study-"))
        self._out = open(self.folder / "stdout.txt", "w")  # noqa: SIM115 - closed in wait()
        self._err = open(self.folder / "stderr.txt", "w")  # noqa: SIM115
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [sys.executable, *SMOKE_COMMAND], cwd=self.folder, env=env,
            stdout=self._out, stderr=self._err,
        )  # fmt: skip

    def wait(self, timeout: float) -> subprocess.CompletedProcess:
        """The finished command, as subprocess.run would have returned it."""
        try:
            returncode = self.process.wait(timeout=timeout)
        finally:
            self.stop()
        out, err = ((self.folder / name).read_text() for name in ("stdout.txt", "stderr.txt"))
        return subprocess.CompletedProcess(self.process.args, returncode, out, err)

    def stop(self) -> None:
        """Ends a study still running as Ctrl-C would (Ray shut down, the store closed), and
        kills it if it has not ended within 20 s."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._out.close()
        self._err.close()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def start_early(config: pytest.Config) -> None:
    """Called at configuration, before collection imports the test modules (20 s and more of
    torch, transformers and MLflow): on a plain `pytest` run of the test paths, with no -k
    and a marker expression that keeps the smoke test, its study starts now. Collection
    stops it again if the test is not run after all (start_if_selected)."""
    option = config.option
    plain_run = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    if not plain_run or option.keyword or option.collectonly or getattr(option, "lf", False):
        return
    if _under_xdist(config):
        return
    if option.markexpr:
        keeps = Expression.compile(option.markexpr).evaluate(lambda name, **_: name in MARKS)
        if not keeps:
            return
    config.stash[_KEY] = BackgroundStudy()


def _under_xdist(config: pytest.Config) -> bool:
    """Whether pytest-xdist spreads the tests over workers (`-n N`): its controller runs no
    test and every worker collects every test, so a study started here would run where its
    test may not. Under -n the smoke test starts its study when it runs (`started`)."""
    return hasattr(config, "workerinput") or bool(getattr(config.option, "numprocesses", None))


def start_if_selected(session: pytest.Session) -> None:
    """Called when collection ends: if the smoke test is among the tests to run, move it to
    the end and start its study now (unless it started early); if not, stop one that did."""
    smoke = [item for item in session.items if item.nodeid == SMOKE_NODE]
    if not smoke or session.config.option.collectonly or _under_xdist(session.config):
        remove(session.config)
        return
    session.items.remove(smoke[0])
    session.items.append(smoke[0])
    after = [item for item in session.items if item.nodeid in AFTER_SMOKE]
    for item in after:
        session.items.remove(item)
        session.items.append(item)
    started(session.config)


def started(config: pytest.Config) -> BackgroundStudy:
    """The study started for this session (one is started now when none was, e.g. when the
    test is run through another node id)."""
    if _KEY not in config.stash:
        config.stash[_KEY] = BackgroundStudy()
    return config.stash[_KEY]


def remove(config: pytest.Config) -> None:
    """At the session's end, or when the smoke test is not run: stops a study still running
    (an interrupted session) and removes its folder."""
    study = config.stash.get(_KEY, None)
    if study is not None:
        study.remove()
        del config.stash[_KEY]
