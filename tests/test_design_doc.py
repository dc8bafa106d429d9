"""docs/design.md names every module of study/ and trainables/, so a newcomer finds each one's
job there. A module counts as named when the page has its path (`study/run.py`, `study/run`,
`study.run`; for a package, its `__init__.py` or its folder), or, in "Who owns what", its
short name in backticks after its package's folder in backticks (`study/spec/` ... `build`).

The other way round, every name design.md and testing.md give a module, a folder or a test file
exists, so a page that moved on with the code is caught as well as one left behind: each path
(`study/spec/limits.py`, `tests/trainables/model/`, `bench/scale.py`), each dotted name (its
longest module prefix must exist, and what follows it must be defined at that module's top
level: `study.plan.trial_config`), and each short name that "Who owns what" describes outside
parentheses after its package's folder is a module of that package, described once there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.study_helpers import REPO

DESIGN = REPO / "docs" / "design.md"
TESTING = REPO / "docs" / "testing.md"
PACKAGES = ("study", "trainables")
# the folders whose paths the pages name; a part in capitals or <angle brackets> stands for any
# name (`bench/NAME.py`, `tests/study/<package>/`), and stops the path there
PATH_ROOTS = ("study", "trainables", "tests", "bench")
PATH = re.compile(r"(?<![\w./-])(?:" + "|".join(PATH_ROOTS) + r")(?:/[a-z_][\w.]*)+/?")
DOTTED = re.compile(r"(?<![\w./-])(?:study|trainables|tests)(?:\.\w+)+")
# `study.json`, `study.yaml`: files, not modules
FILE_SUFFIXES = {"json", "yaml", "md", "py", "csv", "html", "png"}


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


def _path_exists(root: Path, path: str) -> bool:
    """A file, a folder, or a module named without its .py."""
    named = root / path.rstrip("/.")
    return named.exists() or named.with_name(named.name + ".py").exists()


def _module_file(root: Path, dotted: list[str]) -> Path | None:
    """The file of a module or package named by its dotted parts, or None."""
    base = root.joinpath(*dotted)
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _top_level_names(module: Path) -> set[str]:
    """What a module defines or imports at its top level (its classes, functions, constants)."""
    names = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def _dotted_resolves(root: Path, dotted: str) -> bool:
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        module = _module_file(root, parts[:end])
        if module is not None:
            return end == len(parts) or parts[end] in _top_level_names(module)
    return False


def _described_modules(section: str) -> list[tuple[str, str]]:
    """(package folder, short name) for each name in backticks that "Who owns what" describes
    as a module: after its package's folder in the same bullet, outside parentheses (inside
    them a module's own classes and functions are named). A file path ends the package's run."""
    described = []
    for bullet in re.split(r"\n- ", section):
        package, depth = None, 0
        for match in re.finditer(r"`([^`]+)`|[()]", bullet):
            if match.group(0) in "()":
                depth = max(0, depth + (1 if match.group(0) == "(" else -1))
                continue
            token = match.group(1)
            if token.split("/")[0] in PACKAGES and "/" in token:
                package = token if token.endswith("/") else None
            elif depth == 0 and package and re.fullmatch(r"\w+", token):
                described.append((package, token))
    return described


def _missing(text: str, root: Path = REPO) -> list[str]:
    """The paths, dotted names and described modules of a page that do not exist under root."""
    missing = [path for path in PATH.findall(text) if not _path_exists(root, path)]
    missing += [
        name
        for name in DOTTED.findall(text)
        if name.rsplit(".", 1)[1] not in FILE_SUFFIXES and not _dotted_resolves(root, name)
    ]
    if "## Who owns what" in text:
        section = text.split("## Who owns what", 1)[1].split("\n## ", 1)[0]
        missing += [
            f"{package}{name}"
            for package, name in _described_modules(section)
            if name != "__init__" and not _path_exists(root, package + name)
        ]
    return sorted(set(missing))


def _described_twice(text: str) -> list[str]:
    section = text.split("## Who owns what", 1)[1].split("\n## ", 1)[0]
    described = _described_modules(section)
    return sorted({f"{p}{n}" for p, n in described if described.count((p, n)) > 1})


def test_every_module_folder_and_test_the_pages_name_exists():
    for page in (DESIGN, TESTING):
        missing = _missing(page.read_text())
        assert not missing, f"{page.name} names what does not exist: " + ", ".join(missing)


def test_who_owns_what_describes_each_module_once():
    twice = _described_twice(DESIGN.read_text())
    assert not twice, "docs/design.md describes more than once: " + ", ".join(twice)


def test_the_existence_rule_sees_what_is_missing(tmp_path):
    (tmp_path / "study" / "spec").mkdir(parents=True)
    (tmp_path / "study" / "__init__.py").write_text("")
    (tmp_path / "study" / "run.py").write_text("")
    (tmp_path / "study" / "spec" / "__init__.py").write_text("from x import load_study\n")
    (tmp_path / "study" / "spec" / "build.py").write_text("def check():\n    pass\nLIMIT = 1\n")
    (tmp_path / "tests" / "spec").mkdir(parents=True)
    page = (
        "`study/spec/build.py`, `study/spec/gone.py`, study.spec.build.check, study.spec.LIMIT,"
        " study.spec.load_study, study.spec.build.LIMIT, study.nothing, `tests/spec/`,"
        " `tests/old/`, `bench/NAME.py`, `study.json`, `tests/spec/<package>/`\n"
        "## Who owns what\n- `study/spec/`: `build` (`check`, `absent`), `reading`, and"
        " `study/run.py` (`gone_too`) `run`\n- `build` again\n## Next\n"
    )
    assert _missing(page, tmp_path) == [
        "study.nothing",
        "study.spec.LIMIT",
        "study/spec/gone.py",
        "study/spec/reading",
        "tests/old/",
    ]
    page += "## Who owns what\n- `study/spec/`: `build` (one), `build` (two)\n## End\n"
    assert _described_twice(page.replace("## Who owns what", "## Before", 1)) == [
        "study/spec/build"
    ]
