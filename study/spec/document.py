"""A study file's data together with the line of every field, and the one-line errors that
point at them.

Every check of a study reports through a `Doc`: `doc.bad(path, value, allowed)` gives
`file:line: field: value is not allowed: what is`, where the line is the one the applied
profile writes the field on, else the one the base writes it on; a field that a command-line
override wrote (`--set fixed.epochs=abc`) is named by that override instead of a line. The
wording helpers below keep values, field names and suggestions alike in every message.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from study.spec.keys import FACTORS
from trainables.errors import ConfigError, joined

FieldPath = tuple[str | int, ...]

_TEXT_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


class SpecError(ConfigError):
    """A study file that cannot be run; the message is one line starting with the file."""


@dataclass
class Doc:
    """Study data plus where each field is written, so errors can point at a line."""

    display: str
    data: dict
    lines: dict[FieldPath, int]
    profile: str | None = None
    overrides: dict[FieldPath, str] = field(default_factory=dict)  # path -> `--set K=V`

    def override_of(self, path: FieldPath) -> str | None:
        """The `--set` option that wrote `path`, or a field around it, or, for a field the
        file does not write, a field inside it (`--set fixd.lr=1e-4` wrote `fixd`); None when
        the file did."""
        for cut in range(len(path), 0, -1):
            if path[:cut] in self.overrides:
                return self.overrides[path[:cut]]
        if not self._written(path):
            for written, option in self.overrides.items():
                if written[: len(path)] == path:
                    return option
        return None

    def _written(self, path: FieldPath) -> bool:
        """Whether the file writes `path`, in its base or in the applied profile."""
        in_profile = self.profile is not None and ("profiles", self.profile, *path) in self.lines
        return path in self.lines or in_profile

    def _where(self, path: FieldPath) -> tuple[str, str]:
        """What an error about `path` starts with (`file:line` or the override) and the
        field's shown name."""
        source = self.override_of(path)
        if source is not None:
            return source, dotted(path)
        line, name = self.locate(path)
        return f"{self.display}:{line}", name

    def locate(self, path: FieldPath) -> tuple[int, str]:
        """Line and shown name of `path`: where the applied profile writes it (or the nearest
        field around it that the profile writes), else where the base does; a missing field gets
        the line of the nearest field around it."""
        for cut in range(len(path), -1, -1):
            prefix = path[:cut]
            in_profile = ("profiles", self.profile, *prefix)
            if self.profile is not None and cut and in_profile in self.lines:
                return self.lines[in_profile], dotted(("profiles", self.profile, *path))
            if prefix in self.lines:
                return self.lines[prefix], dotted(path)
        return 1, dotted(path)

    def fail(self, path: FieldPath, text: str) -> SpecError:
        where, name = self._where(path)
        return SpecError(f"{where}: {name or '(top level)'}: {joined(text)}")

    def bad(self, path: FieldPath, value: Any, allowed: str) -> SpecError:
        return self.fail(path, f"{show(value)} is not allowed: {allowed}")

    def missing(self, path: FieldPath, allowed: str) -> SpecError:
        where, name = self._where(path)
        return SpecError(f"{where}: {name} is missing: {joined(allowed)}")

    def mapping(self, path: FieldPath, value: Any, allowed: str) -> None:
        if not isinstance(value, dict):
            raise self.bad(path, value, allowed)

    def check_keys(
        self, path: FieldPath, mapping: dict, allowed: tuple[str, ...], what: str = ""
    ) -> None:
        for key in mapping:
            if key not in allowed:
                where = f" for {what}" if what else ""
                if key in FACTORS and "fixed" in allowed:
                    where += " (factors go under grid, search or fixed)"
                raise self.fail(
                    (*path, str(key)),
                    f"unknown key {key!r}{where}{suggest(key, allowed)}; known keys: "
                    f"{', '.join(allowed)}",
                )

    def integer(self, path: FieldPath, value: Any, minimum: int | None, allowed: str) -> int:
        if not is_int(value) or (minimum is not None and value < minimum):
            raise self.bad(path, value, allowed + text_number_hint(value))
        return value

    def number(
        self, path: FieldPath, value: Any, ok: Callable[[float], bool], allowed: str
    ) -> float | int:
        is_number = isinstance(value, float | int) and not isinstance(value, bool)
        if not is_number or not math.isfinite(value) or not ok(value):
            raise self.bad(path, value, allowed + text_number_hint(value))
        return value

    def distinct(self, path: FieldPath, written: list, values: list) -> None:
        """Each of `values` (the checked form of the list `written` at `path`) only once."""
        first: dict[Any, int] = {}  # by a hashable form: a long list is checked in one pass
        for index, value in enumerate(values):
            earlier = first.setdefault(_frozen(value), index)
            if earlier < index:
                _, other = self.locate((*path, earlier))
                raise self.bad(
                    (*path, index),
                    written[index],
                    f"it repeats {other} ({show(value)}); each value must be different",
                )


def _frozen(value: Any) -> Any:
    """`value` in a hashable form equal exactly when the values are equal (lists and mappings
    compare by content)."""
    if isinstance(value, list | tuple):
        return ("list", tuple(_frozen(item) for item in value))
    if isinstance(value, dict):
        return ("dict", frozenset((key, _frozen(item)) for key, item in value.items()))
    if isinstance(value, set):
        return ("set", frozenset(value))
    return value


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def text_number_hint(value: Any) -> str:
    """A number in quotes is text to YAML; say so, since `1e-5` unquoted is a number here."""
    if isinstance(value, str) and _TEXT_FLOAT.fullmatch(value.strip()):
        return f" ({value} is quoted, so YAML reads it as text: write it without quotes)"
    return ""


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def suggest(name: Any, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(str(name), known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def show(value: Any, limit: int = 80) -> str:
    text = repr(list(value) if isinstance(value, tuple) else value)
    return joined(text if len(text) <= limit else text[: limit - 3] + "...")


def dotted(path: FieldPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
