"""Old module names of moved code, kept importable so that studies saved before the move
resume.

Ray Tune pickles a phase's searcher, scheduler and callbacks into the experiment's saved
state (`tuner.pkl`, `searcher-state-*.pkl`), and pickle names each class by the module it
was defined in. A study started before `study.scheduling` became `study.search` (and
`study.phases`, `study.rounds`, `study.storage*`, `study.saved_state` became
`study.execution`) therefore asks for `study.scheduling.ArmSearcher` when it resumes.

`install()` (called by `study/__init__.py`) puts a finder first on `sys.meta_path` that
answers only for the names in `MOVED`, and only when something imports one: the alias is
then a module whose attributes are looked up in the new modules, in the order listed. It
goes first so that no stale copy of an old file (a checkout beside this one that an editable
install points at, an older wheel) can answer instead.
Nothing is imported ahead of that, so `import study.report` still imports neither Ray nor
torch. New saves name the new modules; an old name can go once no saved study needs it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types

MOVED: dict[str, tuple[str, ...]] = {
    "study.scheduling": (
        "study.search.explore",
        "study.search.confirm",
        "study.search.schedulers",
        "study.search.record",
        "study.search.saved",
        "study.search.tune_internals",
    ),
    "study.phases": (
        "study.execution.context",
        "study.execution.phases",
        "study.execution.tuner",
        "study.execution.rounds",
        "study.execution.runtime",
        "study.tracking.start",
    ),
    "study.rounds": ("study.execution.rounds",),
    "study.storage": ("study.execution.storage",),
    "study.storage_guard": ("study.execution.storage_guard",),
    "study.saved_state": ("study.execution.saved_state",),
}


class _Alias(types.ModuleType):
    """An old module name; each attribute asked of it comes from the first new module that
    has it."""

    def __init__(self, name: str, targets: tuple[str, ...]):
        super().__init__(name, f"moved: see {', '.join(targets)}")
        self._targets = targets

    def __getattr__(self, attr: str):
        if attr.startswith("__"):  # the import system probing a module: not ours to answer
            raise AttributeError(attr)
        for target in self._targets:
            module = importlib.import_module(target)
            if hasattr(module, attr):
                return getattr(module, attr)
        raise AttributeError(f"module {self.__name__!r} (moved) has no attribute {attr!r}")


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _Alias(spec.name, MOVED[spec.name])

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the alias resolves its attributes when asked."""


def install() -> None:
    """Answer for the old names before any other finder; once per interpreter."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
