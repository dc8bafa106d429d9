"""Write constraints.txt: the exact version of every package the project and its `dev` extra
need, as installed in the running environment (the one the tests passed in), so that
`with-venv` installs the same versions on another machine next month.

    ./with-venv python .ci/lock_constraints.py     # after changing or upgrading a dependency

torch is pinned at its release without the local label (`torch==2.13.0`, not `+cpu`): a
pin without one is met by the CPU build and by a CUDA build alike, so the index pip is pointed
at chooses the build (docs/install.md) and the lock the release. The CUDA libraries and
triton, which only a CUDA build of torch pulls in, are left out.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PROJECT = "ner-depth-study"
EXTRAS = ("dev",)
LEFT_OUT = re.compile(r"^(triton|nvidia-.*)$")
LOCAL_LABEL = re.compile(r"\+.*$")  # 2.13.0+cpu: the build, which the lock leaves open
OUT = Path(__file__).resolve().parents[1] / "constraints.txt"


def closure(project: str, extras: tuple[str, ...]) -> dict[str, str]:
    """Every installed distribution `project[extras]` needs, by canonical name: version."""
    found: dict[str, str] = {}
    todo = [(project, frozenset(extras))]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, wanted = todo.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        dist = metadata.distribution(name)
        if canonicalize_name(name) != canonicalize_name(project):
            found[canonicalize_name(name)] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            envs = [{"extra": extra} for extra in wanted] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((req.name, frozenset(req.extras)))
    return found


def pinned(installed: dict[str, str]) -> dict[str, str]:
    """The lock's pins of `installed` (name: version): the CUDA libraries left out, and each
    version without a local label (torch's `+cpu`)."""
    return {n: LOCAL_LABEL.sub("", v) for n, v in installed.items() if not LEFT_OUT.match(n)}


def main() -> int:
    pins = pinned(closure(PROJECT, EXTRAS))
    python = ".".join(map(str, sys.version_info[:2]))
    header = (
        f"# Exact versions of every dependency of ner-depth-study[dev], as tested on\n"
        f"# Python {python} ({sys.platform}); torch without its build label (+cpu), which the\n"
        "# package index decides. with-venv installs with -c constraints.txt, and so does\n"
        "# `pip install -c constraints.txt .` (docs/install.md). Regenerate with:\n"
        "#   ./with-venv python .ci/lock_constraints.py\n"
    )
    OUT.write_text(header + "".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
    print(f"wrote {len(pins)} pins to {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
