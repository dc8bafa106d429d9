"""What every fuzz case checks, how it is run, and the settings that size a fuzz run.

A case is a real command, `python -m study.run ...` or `python -m trainables ...`, run by a
`CommandServer` (tests/command_server.py): a process that has imported the command once and
runs the command's module as `__main__` for each case, in the case's own folder, with its file
descriptors 1 and 2 captured as raw bytes; every FORK_EVERY-th case runs in a child forked for
it, a process of its own. The property (issues 30 and 48): the command exits 0, or exits 2
with exactly one line on its file descriptor 2, `error: ...` (no control character in it),
and nothing else there (no log line, no warning, no traceback); and nothing under the whole
temporary root (the case's folder, and the HOME and TMPDIR the commands run with) was created,
removed or changed by a refused case, file by file with their hashes. Where a command is
stopped before its work (`stop_at`), exit 0 means every check before that passed.

Sizing: `FUZZ_EXAMPLES` (default 2000) is the number of generated inputs of one run, shared
between the fuzz tests in the proportions each declares with `fuzz_settings(share)`. The
default run is derandomized (the same inputs every time, so the default tier cannot flake) and
keeps no example database; `FUZZ_RANDOM=1` draws fresh inputs each run and keeps what it finds
under `.hypothesis/` (docs/reliability.md says how to run a long one).
"""

from __future__ import annotations

import os
import re
import unicodedata

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests.command_server import CommandServer, Outcome

__all__ = ["CommandServer", "Outcome", "check_outcome", "error_line", "fuzz_settings"]

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "2000"))
RANDOM = os.environ.get("FUZZ_RANDOM", "") not in ("", "0")
# every FORK_EVERY-th case runs in a child forked for it (a process of its own, exiting as the
# interpreter does) rather than in the server: a sample that checks the server's reset
FORK_EVERY = int(os.environ.get("FUZZ_FORK_EVERY", "100"))


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


def error_line(outcome: Outcome) -> str:
    """The one line of a refusal: fd 2 holds `error: ...` and a line break, nothing else."""
    err, breaks = outcome.err, outcome.err.count(b"\n")
    assert err.endswith(b"\n") and breaks == 1, (
        f"expected exactly one line on stderr, got {breaks} line breaks: {err[-3000:]!r}"
    )
    line = err[:-1].decode("utf-8")  # a terminal shows UTF-8; a stray byte fails here
    assert line.startswith("error: ") and line[len("error: ") :].strip(), line
    controls = [c for c in line if unicodedata.category(c) == "Cc"]  # \r, ESC, BEL, ...
    assert not controls, f"control characters {controls} in {line!r}"
    return line


def _listed(paths: tuple[str, ...]) -> str:
    return f"{len(paths)} paths: {list(paths[:10])}{' ...' if len(paths) > 10 else ''}"


def check_outcome(
    outcome: Outcome, where: re.Pattern[str] | None = None, *, writes_on_success: bool = False
) -> str | None:
    """Exit 0, or exit 2 and one `error:` line (matching `where` when given); a refused case
    wrote nothing under the root, nor did a case that succeeded unless `writes_on_success`
    (a command stopped where it would start, past the checks that precede its first write).
    The refusal's line, or None."""
    assert outcome.code in (0, 2), f"exit {outcome.code}: {outcome.err[-3000:]!r}"
    if outcome.code == 0:
        assert writes_on_success or not outcome.written, f"wrote {_listed(outcome.written)}"
        return None
    assert not outcome.written, f"refused, yet the root changed: {_listed(outcome.written)}"
    line = error_line(outcome)
    if where is not None:
        assert where.match(line), f"not naming file, line and key: {line!r}"
    return line
