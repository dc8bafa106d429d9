"""Command-line overrides: `--set KEY=VALUE`, a dotted key into the study file and a YAML value.

`python -m study.run s.yaml --set fixed.epochs=5 --set model=/models/xlmr` runs the study as if
the file said so: each override replaces the value at its key after the profile is merged (a
mapping value replaces the whole mapping; `null` removes the key, as in a profile), then the
study is checked exactly like a file. An error in an overridden field names the override
instead of a line of the file, and an unknown key gets the same did-you-mean as in a file.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from study.spec.document import Doc, FieldPath, SpecError, dotted, show
from study.spec.keys import TOP_LEVEL_KEYS
from trainables.errors import joined
from trainables.yaml_reading import parse_value

FORM = "expected KEY=VALUE with a dotted KEY into the study file, e.g. fixed.epochs=5"


@dataclass(frozen=True)
class Override:
    text: str  # as typed, e.g. `fixed.epochs=5`
    path: FieldPath
    value: Any

    @property
    def option(self) -> str:
        """How messages name it: `--set fixed.epochs=5`."""
        return f"--set {self.text}"

    def canonical(self) -> tuple[str, str]:
        """The key and value in a form two invocations can be compared by (`--resume`)."""
        return dotted(self.path), json.dumps(self.value, sort_keys=True, default=str)


def parse_overrides(texts: Sequence[str]) -> list[Override]:
    """Each `KEY=VALUE` read: a dotted key (a number indexes a list) and a YAML value."""
    return [_parse(text) for text in texts]


def _parse(text: str) -> Override:
    key, sep, raw = text.partition("=")
    parts = key.strip().split(".")
    if not sep or not all(part.strip() for part in parts):
        raise SpecError(f"--set {text}: {FORM}")
    try:
        value = parse_value(raw)
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err)
        raise SpecError(f"--set {text}: the value is not valid YAML ({joined(problem)})") from None
    path = tuple(_key_part(p) for p in parts)
    return Override(text, path, value)


def _key_part(part: str) -> str | int:
    """A list index where the part is written in ASCII digits (`grid.depth.0`), else a key;
    str.isdigit alone would take superscripts such as '¹', which int() refuses."""
    part = part.strip()
    return int(part) if part.isascii() and part.isdigit() else part


def apply_overrides(doc: Doc, overrides: Sequence[Override]) -> Doc:
    """The study with every override applied in order; errors about an overridden field (or
    one inside it) name the override from here on."""
    if not overrides:
        return doc
    data = copy.deepcopy(doc.data)
    marks = dict(doc.overrides)
    for override in overrides:
        if override.path[0] == "profiles":
            raise SpecError(f"{override.option}: profiles cannot be set; choose one with "
                            "--profile and override its settings by key")  # fmt: skip
        marks[_put(data, override)] = override.option
    out = Doc(doc.display, data, doc.lines, doc.profile, marks)
    out.check_keys((), data, tuple(key for key in TOP_LEVEL_KEYS if key != "profiles"))
    return out


def _put(data: dict, override: Override) -> FieldPath:
    """Set the override's value; the path it wrote, a number being a key in a mapping and an
    index in a list."""
    node: Any = data
    *parents, last = override.path
    at: FieldPath = ()  # where `node` is
    for part in parents:
        key = _key(node, part)
        child = _child(node, key, override, at)
        if child is None:  # a new key, or one a profile removed: a fresh mapping
            child = {}
            _assign(node, key, child, override, at)
        node, at = child, (*at, key)
    key = _key(node, last)
    _assign(node, key, override.value, override, at)
    return (*at, key)


def _key(node: Any, part: str | int) -> str | int:
    return str(part) if isinstance(node, dict) else part


def _child(node: Any, part: str | int, override: Override, at: FieldPath) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int):
        _check_index(node, part, override, at)
        return node[part]
    raise _not_a_container(node, override, at)


def _assign(node: Any, part: str | int, value: Any, override: Override, at: FieldPath) -> None:
    if isinstance(node, dict):
        node[part] = value
    elif isinstance(node, list) and isinstance(part, int):
        _check_index(node, part, override, at)
        node[part] = value
    else:
        raise _not_a_container(node, override, at)


def _check_index(node: list, index: int, override: Override, at: FieldPath) -> None:
    if index >= len(node):
        raise SpecError(f"{override.option}: {dotted(at)} has {len(node)} item(s); indices "
                        f"are 0..{len(node) - 1}")  # fmt: skip


def _not_a_container(node: Any, override: Override, at: FieldPath) -> SpecError:
    return SpecError(f"{override.option}: {dotted(at)} is {show(node)}, which has no keys; "
                     f"set {dotted(at)} itself")  # fmt: skip


def check_same_overrides(saved: Sequence[str], given: Sequence[str]) -> None:
    """`--resume` continues a run as it was started: a different set of overrides would
    change the study under trials already run, so it is refused in one line."""
    before = [o.canonical() for o in parse_overrides(saved)]
    now = [o.canonical() for o in parse_overrides(given)]
    if before == now:
        return
    shown = " ".join(f"--set {text}" for text in saved) or "no --set options"
    typed = " ".join(f"--set {text}" for text in given) or "none"
    raise SpecError(
        f"--resume: the run being resumed was started with {shown}, this command gives "
        f"{typed}; resume with the same --set options, or start a new run without --resume"
    )
