"""The import graph of study/ and trainables/, read from the source (nothing is imported): no
import circle among their modules, study reaches into trainables only through the torch-free
`trainables.settings` and the Tune entry point, trainables never imports study, the driver
(execution, search, tracking) never imports the report, and trainables/ keeps at most 10
modules at its top level (the rest live in packages by job)."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

from tests.study_helpers import REPO

PACKAGES = ("study", "trainables")
# what study may import from trainables: the settings package and the Tune entry point
STUDY_MAY_IMPORT = {"trainables.settings", "trainables.tune_adapter"}
MOST_TOP_LEVEL_MODULES = 10


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    _module_name(path): path for package in PACKAGES for path in (REPO / package).rglob("*.py")
}


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _type_checking_only(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith(
        "TYPE_CHECKING"
    )


def _imported(name: str, path: Path) -> set[str]:
    """The study/trainables modules `name` imports anywhere in its body (a deferred import
    runs too), except under `if TYPE_CHECKING:`, which never runs."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if _type_checking_only(node):
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return {target for target in found if target in MODULES and target != name}


# module -> modules whose code runs when it imports: the named module and the packages above
# it, less the packages above the importer itself (Python has run those before the importer)
GRAPH = {
    name: {
        run
        for target in _imported(name, path)
        for run in (*_ancestors(target), target)
        if run in MODULES and run not in _ancestors(name) and run != name
    }
    for name, path in MODULES.items()
}


def test_no_import_circle_among_study_and_trainables_modules():
    try:
        tuple(graphlib.TopologicalSorter(GRAPH).static_order())
    except graphlib.CycleError as err:
        pytest.fail("import circle: " + " -> ".join(err.args[1]))


def test_study_imports_only_the_settings_and_the_tune_entry_point_from_trainables():
    reaching = sorted(
        f"{name} imports {target}"
        for name, path in MODULES.items()
        if name.split(".")[0] == "study"
        for target in _imported(name, path)
        if target.split(".")[0] == "trainables" and target not in STUDY_MAY_IMPORT
    )
    assert not reaching, "\n".join(reaching)


def test_trainables_never_imports_study():
    reaching = sorted(
        f"{name} imports {target}"
        for name, path in MODULES.items()
        if name.split(".")[0] == "trainables"
        for target in _imported(name, path)
        if target.split(".")[0] == "study"
    )
    assert not reaching, "\n".join(reaching)


def test_the_driver_never_imports_the_report():
    """The report reads MLflow through `study.tracking.reading`; the driver reads the same,
    and a report module must never be loaded by a running study."""
    driver = ("study.execution", "study.search", "study.tracking")
    reaching = sorted(
        f"{name} imports {target}"
        for name, path in MODULES.items()
        if name.startswith(driver)
        for target in _imported(name, path)
        if target == "study.report" or target.startswith("study.report.")
    )
    assert not reaching, "\n".join(reaching)


def test_trainables_has_few_modules_at_its_top_level():
    top = sorted(path.name for path in (REPO / "trainables").glob("*.py"))
    assert len(top) <= MOST_TOP_LEVEL_MODULES, top


def test_the_graph_sees_imports():
    """The rules above hold because imports are found, not because none are: known edges."""
    assert "trainables.settings" in GRAPH["study.spec.build"]
    assert "trainables.settings.config" in GRAPH["trainables.settings"]
    assert "trainables.training.train" in GRAPH["trainables.training.stages"]
    assert "study.tracking.reading" in GRAPH["study.execution.rounds"]
    assert "study.tracking.reading" in GRAPH["study.report.build"]
