"""Write constraints.txt: the exact version of every package the project and its `dev` extra
need, as installed in the running environment (the one the tests passed in), so that
`with-venv` installs the same versions on another machine next month.

    ./with-venv python .ci/lock_constraints.py     # after changing or upgrading a dependency

torch is left out: its build (CPU or CUDA, a local version such as +cpu) is chosen by
with-venv's TORCH_SPEC and TORCH_INDEX_URL, and a pinned +cpu would refuse a CUDA build; so
are the CUDA libraries and triton, which only a CUDA build of torch pulls in.
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
LEFT_OUT = re.compile(r"^(torch|triton|nvidia-.*)$")
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


def main() -> int:
    pins = {n: v for n, v in closure(PROJECT, EXTRAS).items() if not LEFT_OUT.match(n)}
    python = ".".join(map(str, sys.version_info[:2]))
    header = (
        f"# Exact versions of every dependency of ner-depth-study[dev] but torch, as tested on\n"
        f"# Python {python} ({sys.platform}).\n"
        "# with-venv installs with -c constraints.txt; regenerate with:\n"
        "#   ./with-venv python .ci/lock_constraints.py\n"
    )
    OUT.write_text(header + "".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
    print(f"wrote {len(pins)} pins to {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
