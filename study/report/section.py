"""What one optional part of the report is, and where the report finds them all.

The fixed parts of a report (the analysis, what ran, the per-arm table, the verdicts, the
exploratory comparisons, the core plots) are written by `build` and `markdown`. Everything a
reader asks beyond them (the expected best score for a budget, degenerate runs, the variance
split, the single-head tables, ...) is a *section*: one module in `study/report/sections/` that
defines `SECTION`. The report imports every module of that package, so a new statistic is one
new module there and nothing else: its tables become CSV files, its figures PNG files and its
text a part of the page.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from study.tracking.reading import StudyRecord

Tables = dict[str, pd.DataFrame]
# after the per-arm table / right after the verdicts (what qualifies them) / after the
# exploratory comparisons
SLOTS = ("results", "verdicts", "followups")


def _no_figures(record: StudyRecord, tables: Tables, folder: Path) -> dict[str, Path]:
    return {}


@dataclass(frozen=True)
class Section:
    """`tables(record)` computes the section's tables (each saved as `<name>.csv`; empty when
    the section does not apply to this study), `figures(record, tables, folder)` draws into
    the report folder (the record for the study's name, metric and arms: an arm looks the same
    in every figure, `study.report.arm_styles`), `markdown(record, tables)` writes its text
    ('' to leave it out). `order` sorts the sections of a slot; `captions` title the figures
    in the report's plot list, `{metric}` in a caption standing for the study's metric."""

    name: str
    slot: str
    order: int
    tables: Callable[[StudyRecord], Tables]
    markdown: Callable[[StudyRecord, Tables], str]
    figures: Callable[[StudyRecord, Tables, Path], dict[str, Path]] = _no_figures
    captions: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.slot not in SLOTS:
            raise ValueError(f"section {self.name}: slot is one of {SLOTS}, got {self.slot!r}")


def all_sections() -> list[Section]:
    """Every `SECTION` of the modules in `study.report.sections`, in slot and `order` order."""
    from study.report import sections

    found = []
    for info in pkgutil.iter_modules(sections.__path__):
        module = importlib.import_module(f"{sections.__name__}.{info.name}")
        section = getattr(module, "SECTION", None)
        if not isinstance(section, Section):
            raise TypeError(f"{module.__name__} defines no SECTION (a study.report.Section)")
        found.append(section)
    return sorted(found, key=lambda s: (SLOTS.index(s.slot), s.order, s.name))
