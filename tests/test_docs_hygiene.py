"""The pages a newcomer reads stay current: README.md, docs/ and the study files carry no
commit hash and no date (a figure's provenance and superseded figures go to docs/history.md,
the one page exempt), and README.md stays short enough to read in ten minutes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.study_helpers import REPO

HISTORY = REPO / "docs" / "history.md"
README_MOST_LINES = 120
# 7-40 hex characters with a digit and a letter among them (a short or full commit hash), not
# a colour (`#a1b2c3d4`) or part of a longer word; a placeholder such as `<sha>` passes
HASH = re.compile(r"(?<![#\w])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?!\w)")
MONTH = (
    r"Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?"
)
DATE = re.compile(
    rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b(?:{MONTH})\.?,? (?:\d{{1,2}},? )?(?:19|20)\d{{2}}\b"
)


def _pages() -> list[Path]:
    docs = [path for path in sorted((REPO / "docs").rglob("*.md")) if path != HISTORY]
    return [REPO / "README.md", *docs, *sorted((REPO / "search_spaces").glob("*.yaml"))]


def dated_or_hashed(text: str) -> list[str]:
    """`line: token` for each commit-hash-like token and each date in `text`."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        found += [f"{number}: {m.group()}" for m in (*HASH.finditer(line), *DATE.finditer(line))]
    return found


@pytest.mark.parametrize("page", _pages(), ids=lambda path: str(path.relative_to(REPO)))
def test_no_commit_hash_or_date(page):
    found = dated_or_hashed(page.read_text(encoding="utf-8"))
    assert not found, (
        f"{page.relative_to(REPO)} names a commit or a date (say what a value is for, and move "
        f"its provenance to docs/history.md): {'; '.join(found)}"
    )


def test_the_check_sees_hashes_and_dates_and_passes_the_rest():
    flagged = "at 213e7be\nmain at 0caf72f3123c\n2026-11-25\nin November 2026\nNov. 25, 2026"
    assert len(dated_or_hashed(flagged)) == 5
    clean = (
        "colour #a1b2c3d4, `revision: <sha>`, 1234567 trials, a decade, feedbacked, "
        "sha256 fingerprints, 10,000 x 10, May 12 arms, 1e-5, bert-base-cased"
    )
    assert dated_or_hashed(clean) == []


def test_the_readme_is_short():
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MOST_LINES, f"README.md has {lines} lines; keep it to 120"
