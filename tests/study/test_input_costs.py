"""What a file a study names may cost (issue 48): a data file or a study file that is a device,
a FIFO, 2 GiB of NULs or a flat YAML list of millions of values is refused in one line within
5 s and 500 MiB of peak RSS, whatever its size; a `--tracking-uri` sqlite file that is no
database is refused in one line before Ray starts; and a study's text with terminal control
characters is printed escaped.

The costly cases run in one child process, each measured there as the time of the call and
the process's peak RSS (VmHWM, reset before each case through /proc/self/clear_refs, so each
figure is that case's peak, imports included). The child is bounded whatever the code does: a
watchdog ends it when a case runs past WATCHDOG_S (a FIFO waited on), and its address space
is capped above what it holds after its imports, so a reader that regressed to reading
/dev/zero whole fails with a MemoryError instead of filling the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.study_helpers import REPO, run_in_process, study_command, write_study

MAX_S = 5.0
MAX_PEAK_MIB = 500.0
WATCHDOG_S = 30  # a case still running then is a hang: the child ends, the test fails
HEADROOM = 2 * 2**30  # address space the child may add to what its imports hold

CHILD = r"""
import faulthandler, json, os, re, resource, sys, time

from study.spec import load_study
from trainables.data.sources import load_checked_splits

cases, good, watchdog_s, headroom = json.loads(sys.argv[1])


def status(field):
    return int(re.search(field + r":\s+(\d+) kB", open("/proc/self/status").read()).group(1))


def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as out:
            out.write("5")  # VmHWM back to the current RSS (Linux 4.0)
    except OSError:
        pass  # then each peak is the highest so far: an upper bound of the case's own


def run(kind, path):
    if kind == "data":
        load_checked_splits({**good, "train": path})
    else:
        load_study(path, "default")


limit = status("VmSize") * 1024 + headroom
resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
results = {}
for name, kind, path in cases:
    reset_peak()
    faulthandler.dump_traceback_later(watchdog_s, exit=True)
    started = time.perf_counter()
    try:
        run(kind, path)
        error = None
    except Exception as err:
        error = f"{type(err).__name__}: {err}"
    seconds = time.perf_counter() - started
    faulthandler.cancel_dump_traceback_later()
    results[name] = {"seconds": seconds, "peak_mib": status("VmHWM") / 1024, "error": error}
print(json.dumps(results))
"""


def _sparse(path: Path, size: int) -> str:
    """A file of `size` NUL bytes that takes no disk (`truncate -s`)."""
    with path.open("wb") as out:
        out.truncate(size)
    return str(path)


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return str(path)


def _written(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


FLAT_50MB = "- x\n" * (13 * 2**20)  # 52 MiB, 13.6 million values
FLAT_1MB = "- x\n" * 262_000  # just under 1 MiB, 262,000 values
DEEP_1MB = "[" * 500_000 + "]" * 500_000

# name: (what reads it, how the file is made, what its one line says)
CASES = {
    "data /dev/zero": ("data", lambda tmp: "/dev/zero", "/dev/zero: is a character device"),
    "data FIFO": ("data", lambda tmp: _fifo(tmp / "fifo.txt"), "fifo.txt: is a named pipe"),
    "data 2 GiB of NULs": (
        "data",
        lambda tmp: _sparse(tmp / "nuls.txt", 2 * 2**30),
        "nuls.txt: 2 GiB, more than the 256 MiB a data file may hold",
    ),
    "data 200 MiB, no line break": (
        "data",
        lambda tmp: _sparse(tmp / "oneline.txt", 200 * 2**20),
        "oneline.txt:1: a line of more than 1 MiB",
    ),
    "data folder": ("data", lambda tmp: str(tmp), "is a folder, not a file"),
    "study /dev/zero": ("study", lambda tmp: "/dev/zero", "zero: is a character device"),
    "study FIFO": ("study", lambda tmp: _fifo(tmp / "fifo.yaml"), "fifo.yaml: is a named pipe"),
    "study 2 GiB of NULs": (
        "study",
        lambda tmp: _sparse(tmp / "nuls.yaml", 2 * 2**30),
        "nuls.yaml: 2 GiB, more than the 1 MiB a study file may hold",
    ),
    "study 50 MiB flat list": (
        "study",
        lambda tmp: _written(tmp / "flat.yaml", FLAT_50MB),
        "flat.yaml: 52 MiB, more than the 1 MiB a study file may hold",
    ),
    "study 1 MiB flat list": (
        "study",
        lambda tmp: _written(tmp / "flat1.yaml", FLAT_1MB),
        "flat1.yaml:50000:3: too much for a study file: more than 50000 values",
    ),
    "study 1 MiB deep nesting": (
        "study",
        lambda tmp: _written(tmp / "deep.yaml", DEEP_1MB),
        "deep.yaml:1:1001: too much for a study file: nested more than 32 levels deep",
    ),
}


@pytest.fixture(scope="module")
def measured(tmp_path_factory, tiny_corpus) -> dict[str, dict]:
    """Each case's figures from one child process: seconds, peak MiB and its error line."""
    tmp = tmp_path_factory.mktemp("costly")
    cases = [(name, kind, make(tmp)) for name, (kind, make, _) in CASES.items()]
    argument = json.dumps([cases, tiny_corpus, WATCHDOG_S, HEADROOM])
    done = subprocess.run(
        [sys.executable, "-c", CHILD, argument],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=WATCHDOG_S * len(cases) + 300,  # the imports on a loaded machine, then the cases
    )
    assert done.returncode == 0, f"the child ended with {done.returncode}:\n{done.stderr[-3000:]}"
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for name, figures in results.items():  # shown with -s, and in a failure's report
        print(f"{name}: {figures['seconds']:.3f} s, {figures['peak_mib']:.0f} MiB peak RSS")
    return results


@pytest.mark.parametrize("name", list(CASES))
def test_a_file_beyond_its_bounds_is_one_line_within_5_s_and_500_mib(name, measured):
    figures = measured[name]
    error = figures["error"]
    assert error is not None, "accepted"
    assert CASES[name][2] in error
    assert "\n" not in error
    assert error.startswith(("DataError: ", "SpecError: ")), error
    assert figures["seconds"] < MAX_S, figures
    assert figures["peak_mib"] < MAX_PEAK_MIB, figures


# --- the tracking store ---------------------------------------------------------------------


@pytest.fixture
def small_study(tmp_path, tiny_model, tiny_corpus) -> Path:
    return write_study(tmp_path, str(tiny_model), tiny_corpus)


def test_a_tracking_uri_file_that_is_no_sqlite_database_is_one_line_before_ray(
    tmp_path, small_study, monkeypatch
):
    """MLflow took 116 s and 40 warnings to refuse it, after Ray had started; now one line,
    from the file's first 16 bytes, and the file is left as it was."""
    import study.execution

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started")

    # study.run imports it from there as the run starts (its --help loads no Ray)
    monkeypatch.setattr(study.execution, "start_tracking_and_ray", no_ray)
    notes = tmp_path / "notes.db"
    notes.write_text("my notes, not a database\n")
    command = study_command(small_study, tmp_path, "--tracking-uri", f"sqlite:///{notes}")
    started = time.perf_counter()
    code, out, err = run_in_process(command)
    seconds = time.perf_counter() - started
    print(f"refused in {seconds:.2f} s (study.run.main, imports done)")
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert f"{notes} is not an SQLite database" in err
    assert out == "" or out.startswith("study teststudy (profile default): checking"), out
    assert seconds < MAX_S, seconds
    assert notes.read_text() == "my notes, not a database\n"
    assert not (tmp_path / "ray_results").exists() and not (tmp_path / "reports").exists()


@pytest.mark.parametrize("kind", ["text", "folder", "FIFO", "device"])
def test_probe_refuses_a_sqlite_path_that_is_no_database(tmp_path, kind):
    from study.tracking.probe import probe_database
    from trainables.errors import UserInputError

    path = {
        "text": lambda: _written(tmp_path / "x.db", "hello"),
        "folder": lambda: str(tmp_path),
        "FIFO": lambda: _fifo(tmp_path / "x.db"),
        "device": lambda: "/dev/zero",
    }[kind]()
    with pytest.raises(UserInputError) as caught:
        probe_database(f"sqlite:///{path}")
    assert f"MLflow tracking URI sqlite:///{path}: {path}" in str(caught.value)


def test_probe_accepts_a_database_an_empty_file_and_a_new_file(tmp_path):
    import sqlite3

    from study.tracking.probe import probe_database

    with sqlite3.connect(tmp_path / "real.db") as db:
        db.execute("create table t (x)")
    (tmp_path / "empty.db").write_bytes(b"")
    for name in ("real.db", "empty.db", "new.db"):
        probe_database(f"sqlite:///{tmp_path / name}")
    probe_database("sqlite:///:memory:")
    assert not (tmp_path / "new.db").exists()


# --- control characters ---------------------------------------------------------------------


def test_a_description_with_control_characters_is_printed_escaped(
    tmp_path, tiny_model, tiny_corpus
):
    description = "red \x1b[31mtext\x1b[0m, a bell \a, a return \r here, a C1 CSI \x9b"
    study = write_study(tmp_path, str(tiny_model), tiny_corpus, description=description)
    code, out, err = run_in_process(study_command(study, tmp_path, "--dry-run"))
    assert code == 0, err
    assert r"red \x1b[31mtext\x1b[0m, a bell \x07, a return \r here, a C1 CSI \x9b" in out
    assert not any(c in out + err for c in "\x1b\a\r\x9b")
    assert out.count("\n") > 5  # the plan's own lines stay lines


def test_a_metric_name_with_control_characters_is_shown_escaped(tmp_path, tiny_model, tiny_corpus):
    """Shown in the plan where any name is taken, echoed in the error line where the metrics
    an evaluation reports are checked: escaped either way."""
    metric = {"name": "dev\x1b[2Jloss\a", "mode": "min"}
    study = write_study(tmp_path, str(tiny_model), tiny_corpus, metric=metric)
    code, out, err = run_in_process(study_command(study, tmp_path, "--dry-run"))
    assert code in (0, 2), err
    assert r"dev\x1b[2Jloss\x07" in (out if code == 0 else err)
    assert "\x1b" not in out + err and "\a" not in out + err


def test_an_error_line_echoing_a_path_with_control_characters_is_escaped(
    tmp_path, tiny_model, tiny_corpus
):
    data = {**tiny_corpus, "dev": str(tmp_path / "\x1b[31mdev\a.txt")}
    study = write_study(tmp_path, str(tiny_model), tiny_corpus, data=data)
    code, out, err = run_in_process(study_command(study, tmp_path))
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert r"\x1b[31mdev\x07.txt: file not found" in err
    assert "\x1b" not in err and "\a" not in err


def test_the_driver_log_escapes_control_characters_and_keeps_line_breaks():
    import logging

    from study.progress.log_format import PrintableFormatter

    record = logging.LogRecord(
        "study", logging.INFO, __file__, 1, "arm %s\nnext", ("\x1b[1mA",), None
    )
    line = PrintableFormatter().format(record)
    assert line.endswith("study: arm \\x1b[1mA\nnext")
