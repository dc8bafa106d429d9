"""constraints.txt is the lock with-venv and `pip install -c constraints.txt .` install from: it
pins every dependency of the project and its dev extra, torch included (its release; the build
is the package index's choice), at the version installed here, where the tests run, and each
pin is one that pyproject.toml allows; a dependency added or upgraded without re-locking fails
here."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]


def _lock_module():
    spec = importlib.util.spec_from_file_location("lock", REPO / ".ci" / "lock_constraints.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pins() -> dict[str, str]:
    lines = (REPO / "constraints.txt").read_text().splitlines()
    pairs = [line.split("==") for line in lines if line and not line.startswith("#")]
    return {name: version for name, version in pairs}


def test_constraints_pin_every_dependency_at_its_installed_version():
    lock = _lock_module()
    needed = lock.pinned(lock.closure(lock.PROJECT, lock.EXTRAS))
    pins = _pins()
    missing = sorted(set(needed) - set(pins))
    assert not missing, f"not in constraints.txt: {missing}; run .ci/lock_constraints.py"
    differ = {n: (pins[n], v) for n, v in needed.items() if pins[n] != v}
    assert not differ, f"constraints.txt vs installed: {differ}; run .ci/lock_constraints.py"
    assert not Version(pins["torch"]).local  # met by the CPU and the CUDA build alike


def _declared() -> list[Requirement]:
    """The requirements pyproject.toml declares: the dependencies and every extra's."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {}).values()
    return [Requirement(text) for text in [*project["dependencies"], *sum(extras, [])]]


def test_the_lock_and_pyproject_agree():
    """Every requirement of pyproject.toml is pinned, at a version its specifier allows: a
    bound raised or a dependency added in one file and not the other fails here."""
    pins = _pins()
    declared = _declared()
    assert {canonicalize_name(r.name) for r in declared} >= {"torch", "transformers", "pytest"}
    unpinned = sorted(r.name for r in declared if canonicalize_name(r.name) not in pins)
    assert not unpinned, f"in pyproject.toml, not in constraints.txt: {unpinned}"
    outside = {
        str(r): pins[canonicalize_name(r.name)]
        for r in declared
        if not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)
    }
    assert not outside, f"constraints.txt pins what pyproject.toml refuses: {outside}"


def test_with_venv_installs_the_locked_torch():
    """with-venv's default torch is the lock's line, not a release of its own."""
    script = (REPO / "with-venv").read_text()
    assert not re.search(r"torch==\d", script), "with-venv names a torch release"
    assert "grep -m1 '^torch==' constraints.txt" in script
