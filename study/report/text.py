"""Numbers and tables as Markdown, shared by the report page and its sections, so that every
figure in the report is printed the same way."""

from __future__ import annotations

import math

import pandas as pd


def num(value: float | None, digits: int = 4) -> str:
    """A figure with `digits` significant digits, or `digits` decimals below 1; below 0.01
    (a learning rate, an attention distance) `digits - 1` significant digits, which the
    decimals would cut to one or none (0.000158 is not 0.0002). n/a for none or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if abs(value) >= 1:
        return f"{value:.{digits}g}"
    if value != 0 and abs(value) < 10 ** -(digits - 2):
        return f"{value:.{digits - 1}g}"
    return f"{value:.{digits}f}"


def p_value(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def frame_table(frame: pd.DataFrame) -> str:
    """A DataFrame as a Markdown table: whole floats as integers, others by `num`."""
    header = [str(c) for c in frame.columns]
    rows = [[_cell(v) for v in row] for row in frame.itertuples(index=False)]
    return markdown_table(header, rows)


def _cell(value) -> str:
    if isinstance(value, float) and not value.is_integer():
        return num(value)
    return str(int(value)) if isinstance(value, float) else str(value)


def stage_sequence(names: list[str]) -> str:
    """What an arm trained, in order: `spans → target`, or `target` alone."""
    return " → ".join([*names, "target"])
