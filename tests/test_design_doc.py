"""docs/design.md names every module of study/ and trainables/, so a newcomer finds each one's
job there. A module counts as named when the page has its path (`study/run.py`, `study/run`,
`study.run`; for a package, its `__init__.py` or its folder), or, in "Who owns what", its
short name in backticks after its package's folder in backticks (`study/spec/` ... `build`)."""

from __future__ import annotations

import re

from tests.study_helpers import REPO

DESIGN = REPO / "docs" / "design.md"
PACKAGES = ("study", "trainables")


def _modules() -> dict[str, str]:
    """Each module's slash path without .py (a package: its folder, with a trailing /) and
    its short name."""
    out = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            rel = path.relative_to(REPO).with_suffix("")
            if rel.name == "__init__":
                out[f"{rel.parent.as_posix()}/"] = rel.parent.name
            else:
                out[rel.as_posix()] = rel.name
    return out


def _named_in_packages(section: str) -> set[str]:
    """Paths named by a short name after their package's path in backticks."""
    named, package = set(), None
    for token in re.findall(r"`([^`]+)`", section):
        if token.endswith("/") and token.split("/")[0] in PACKAGES:
            package = token
            named.add(token)
        elif package and re.fullmatch(r"[\w/]+/?", token):
            named.add(package + token)
    return named


def _named(text: str) -> set[str]:
    section = text.split("## Who owns what", 1)[1].split("\n## ", 1)[0]
    spelled = {
        match.replace(".", "/")
        for match in re.findall(r"\b(?:study|trainables)(?:[./]\w+)+", text.replace(".py", ""))
    }
    packages = {f"{path}/" for path in spelled} | {
        path.removesuffix("__init__") for path in spelled if path.endswith("/__init__")
    }
    return spelled | packages | _named_in_packages(section)


def test_design_md_names_every_module():
    named = _named(DESIGN.read_text())
    missing = sorted(path for path in _modules() if path not in named)
    assert not missing, "docs/design.md does not name: " + ", ".join(missing)


def test_the_rule_sees_names_and_misses():
    page = "x `study/run.py`\n## Who owns what\n- `study/spec/`: `build`, `keys`\n## Next\n`plan`"
    named = _named(page)
    assert {"study/run", "study/spec/", "study/spec/build", "study/spec/keys"} <= named
    assert "study/spec/plan" not in named and "study/plan" not in named
