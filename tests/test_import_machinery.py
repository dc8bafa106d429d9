"""No code edits `sys.modules` or `sys.path` but tests/conftest.py: a module found by where a
test happened to put something on the path, or a module table a test rewrote, makes what
passes here fail in a user's process. Read from the syntax trees of every Python file of the
project (nothing is imported); the one place allowed is `forget_modules` in tests/conftest.py."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.study_helpers import REPO

FOLDERS = ("study", "trainables", "tests", "bench")
ALLOWED = {Path("tests/conftest.py")}
TABLES = ("modules", "path")
EDITS = {"pop", "popitem", "update", "setdefault", "clear", "insert", "append", "extend",
         "remove", "__setitem__", "__delitem__"}  # fmt: skip


def _is_table(node: ast.AST) -> bool:
    """`sys.modules` or `sys.path`."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr in TABLES
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def edits(source: str) -> list[str]:
    """Line and text of each statement that changes `sys.modules` or `sys.path`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        target = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            target = node.value  # sys.modules[name] = m, del sys.modules[name]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in EDITS:
                target = node.func.value  # sys.path.insert(0, x), sys.modules.pop(name)
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            target = next((t for t in targets if _is_table(t)), None)  # sys.path = [...]
        if target is not None and _is_table(target):
            found.append((node.lineno, f"{node.lineno}: {ast.get_source_segment(source, node)}"))
    return [text for _, text in sorted(found)]


def test_only_the_test_configuration_edits_the_module_table_or_the_path():
    offenders = {}
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            relative = path.relative_to(REPO)
            if relative not in ALLOWED and (found := edits(path.read_text(encoding="utf-8"))):
                offenders[str(relative)] = found
    assert offenders == {}


def test_the_check_sees_each_kind_of_edit_and_not_a_read():
    source = (
        "import sys\n"
        "sys.modules['__main__'] = object()\n"
        "del sys.modules['x']\n"
        "sys.modules.pop('y', None)\n"
        "sys.path.insert(0, 'bench')\n"
        "sys.path += ['z']\n"
        "sys.path = []\n"
        "loaded = 'x' in sys.modules and sys.modules.get('x') and sys.path[0]\n"
    )
    assert [line.split(":")[0] for line in edits(source)] == ["2", "3", "4", "5", "6", "7"]
