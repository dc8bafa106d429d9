"""The import graph of study/ and trainables/, read from the source (nothing is imported): no
import circle among their modules, study reaches into trainables only through the Tune entry
point and the torch-free modules `STUDY_MAY_IMPORT` names (a fresh interpreter checks that they
load no torch), trainables never imports study, the driver (execution, search, tracking) never
imports the report, and trainables/ keeps at most 10 modules at its top level (the rest live in
packages by job)."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.study_helpers import REPO

PACKAGES = ("study", "trainables")
# what study may import from trainables, each from its own package: the Tune entry point, and
# modules that load no torch, so that the driver plans a study and the report reads one without
# it (docs/design.md, "Who owns what", names the same list)
TUNE_ENTRY_POINT = "trainables.tune_adapter"
STUDY_MAY_IMPORT = {
    TUNE_ENTRY_POINT,
    "trainables.settings",  # a trial's settings
    "trainables.errors",  # errors fit for one line
    "trainables.yaml_reading",  # the one YAML reading
    "trainables.input_files",  # files a user names, read within limits
    "trainables.command_line",  # the parser and options every command shares
    "trainables.hub",  # a hub model's config read at once where the hub cannot answer
    "trainables.data.sources",  # a `data:` config checked and its splits read
    "trainables.data.sources.conll",
    "trainables.data.sources.huggingface",
    "trainables.data.relabel",  # LabelMapError: a label map put at its study file line
    "trainables.measures.fingerprints",  # a trial's layer fingerprint, read
    "trainables.measures.fingerprints.compare",  # and compared
    "trainables.training.curves",  # final_gain, the curve's last rise
    "trainables.training.trial_folder",  # the trained tagger's folder name
}
HEAVY = ("torch", "transformers")
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


def test_study_imports_only_the_torch_free_modules_and_the_tune_entry_point_from_trainables():
    reaching = sorted(
        f"{name} imports {target}"
        for name, path in MODULES.items()
        if name.split(".")[0] == "study"
        for target in _imported(name, path)
        if target.split(".")[0] == "trainables" and target not in STUDY_MAY_IMPORT
    )
    assert not reaching, "\n".join(reaching)


def test_what_study_may_import_loads_no_torch():
    """The premise of the rule above, checked where it could break: a module on the list (or
    one it imports) that starts importing torch fails here, not in a slow driver test."""
    modules = sorted(STUDY_MAY_IMPORT - {TUNE_ENTRY_POINT})
    code = (
        f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], done.stdout


def test_every_module_study_may_import_exists():
    assert sorted(STUDY_MAY_IMPORT - MODULES.keys()) == []


def test_design_md_names_what_study_may_import():
    """The list is said in docs/design.md too; a module added here must be added there."""
    design = (REPO / "docs" / "design.md").read_text()
    assert sorted(m for m in STUDY_MAY_IMPORT if f"`{m}`" not in design) == []


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
