"""tests/conftest.py `_named_tests_run`: a slow test named by its node id is collected without
`-m slow`; a file, or another marker expression given on the command line, keeps the tiers."""

from __future__ import annotations

import subprocess
import sys

from tests.study_helpers import REPO

SLOW = "tests/study/stats/test_stats.py::test_array_quantile_aso_is_deepsigs_to_the_last_bit"


def _collected(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1]


def test_a_slow_test_named_by_its_node_id_is_collected():
    named = _collected(f"{SLOW}[5-5]")
    assert named.startswith("1 test collected in"), named


def test_a_file_and_an_explicit_marker_keep_the_tiers():
    assert "deselected" in _collected("tests/study/stats/test_stats.py")
    assert "(1 deselected)" in _collected("-m", "smoke", f"{SLOW}[5-5]")
