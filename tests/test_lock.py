"""constraints.txt is the lock with-venv installs from: it pins every dependency of the project
and its dev extra (torch aside, whose build with-venv chooses), at the version installed here,
where the tests run; a dependency added or upgraded without re-locking fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

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
    needed = {
        name: version
        for name, version in lock.closure(lock.PROJECT, lock.EXTRAS).items()
        if not lock.LEFT_OUT.match(name)
    }
    pins = _pins()
    missing = sorted(set(needed) - set(pins))
    assert not missing, f"not in constraints.txt: {missing}; run .ci/lock_constraints.py"
    differ = {n: (pins[n], v) for n, v in needed.items() if pins[n] != v}
    assert not differ, f"constraints.txt vs installed: {differ}; run .ci/lock_constraints.py"
    assert "torch" not in pins  # with-venv's TORCH_SPEC chooses the build
