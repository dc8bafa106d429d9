"""What every fuzz case checks, and the settings that size a fuzz run.

A case runs a real entry point in-process (`study.run.main`, or the function it calls to check
one input), in its own empty working folder holding only the case's input files. The property
(issue 30): the entry point returns exit 0, or exit 2 with exactly one `error:` line on stderr;
it never raises (a traceback), and the folder holds nothing new afterwards (no MLflow store, no
Ray results folder, no report).

Sizing: `FUZZ_EXAMPLES` (default 2000) is the number of generated inputs of one run, shared
between the fuzz tests in the proportions each declares with `fuzz_settings(share)`. The
default run is derandomized (the same inputs every time, so the default tier cannot flake) and
keeps no example database; `FUZZ_RANDOM=1` draws fresh inputs each run and keeps what it finds
under `.hypothesis/` (docs/reliability.md says how to run a long one).
"""

from __future__ import annotations

import io
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from study.run import _fail
from trainables.errors import UserInputError

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "2000"))
RANDOM = os.environ.get("FUZZ_RANDOM", "") not in ("", "0")


def fuzz_settings(share: float) -> settings:
    """Hypothesis settings for a test that takes `share` of the run's examples."""
    return settings(
        max_examples=max(1, round(EXAMPLES * share)),
        deadline=None,  # a case's time depends on the shared machine, not on the input
        derandomize=not RANDOM,
        database=DirectoryBasedExampleDatabase(".hypothesis/examples") if RANDOM else None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


def files_under(folder: Path) -> set[str]:
    """Every file and folder below `folder`, relative to it."""
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


@contextmanager
def case_folder() -> Iterator[Path]:
    """An empty folder that is the working folder while the case runs."""
    before = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="fuzz-") as name:
        os.chdir(name)
        try:
            yield Path(name)
        finally:
            os.chdir(before)


def run_entry(entry: Callable[[], int], folder: Path) -> Outcome:
    """Run `entry` with its output captured; anything it writes beside the inputs fails."""
    inputs = files_under(folder)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = entry()
    written = files_under(folder) - inputs
    assert not written, f"the case wrote {sorted(written)}"
    return Outcome(code, out.getvalue(), err.getvalue())


def check_outcome(outcome: Outcome, where: re.Pattern[str] | None = None) -> None:
    """Exit 0, or exit 2 and one `error:` line (matching `where` when given)."""
    assert outcome.code in (0, 2), f"exit {outcome.code}: {outcome.err}"
    if outcome.code == 0:
        return
    lines = outcome.err.strip("\n").splitlines()
    assert len(lines) == 1, f"expected one line, got {len(lines)}: {outcome.err!r}"
    assert lines[0].startswith("error: "), lines[0]
    if where is not None:
        assert where.match(lines[0]), f"not naming file, line and key: {lines[0]!r}"


def user_error_outcome(
    check: Callable[[], object], bad_input: tuple[type[Exception], ...] = (UserInputError,)
) -> int:
    """An entry point's handling of a checking function: exit 0 when it passes, the one-line
    refusal and exit 2 on the errors it takes for bad input (study.run.main's); any other
    error propagates, as it would as a traceback."""
    try:
        check()
    except bad_input as err:
        return _fail(str(err))
    return 0
