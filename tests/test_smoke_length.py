"""Every page that says how long the smoke profile takes says the same: "a few minutes" (about
2 on an idle 2-core CPU, several on a loaded one; docs/testing.md has the figures). The pages
once said "seconds-long", "under 2 minutes" and "a 2-minute check" at once."""

from __future__ import annotations

import re
from pathlib import Path

from tests.study_helpers import REPO

SAID = "a few minutes"
# a length in words: "under 2 minutes", "2-minute", "~2 minutes", "seconds-long" (a measured
# figure in seconds, "took 229 s", is a measurement, not the length a page promises)
OTHER_LENGTH = re.compile(
    r"\b\d+(?:-| )minutes?\b|~\s?\d+\s?min|\bseconds?-long\b|\bunder a minute\b"
)


def _places() -> list[Path]:
    docs = [p for p in sorted((REPO / "docs").glob("*.md")) if p.name != "history.md"]
    code = [REPO / "study" / "run.py", REPO / "study" / "command_line.py"]
    return [REPO / "README.md", *docs, *sorted((REPO / "search_spaces").glob("*.yaml")), *code]


def smoke_lengths(path: Path) -> list[tuple[int, str]]:
    """(line number, line) of each line about the smoke profile that names its length."""
    whole_file = path.name == "smoke.yaml"  # the smoke study itself
    lines = path.read_text(encoding="utf-8").splitlines()
    return [
        (number, line)
        for number, line in enumerate(lines, 1)
        if (whole_file or "smoke" in line.lower())
        and (SAID in line or OTHER_LENGTH.search(line.replace(SAID, "")))
    ]


def test_the_smoke_profile_has_one_length_everywhere():
    found = [(path, number, line) for path in _places() for number, line in smoke_lengths(path)]
    other = [f"{p.relative_to(REPO)}:{n}: {line.strip()}" for p, n, line in found
             if OTHER_LENGTH.search(line.replace(SAID, ""))]  # fmt: skip
    assert not other, "say 'a few minutes':\n" + "\n".join(other)
    assert len(found) >= 5, found  # README, running.md, the study files, the command's help


def test_another_length_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("The smoke profile: under 2 minutes.\n`smoke` takes a few minutes.\n")
    assert [n for n, _ in smoke_lengths(page)] == [1, 2]
    assert OTHER_LENGTH.search("the smoke study, a 2-minute check")
    assert not OTHER_LENGTH.search("the smoke study takes a few minutes")
