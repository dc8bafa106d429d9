"""The one way this project reads YAML: study files, trial configs and `--set KEY=VALUE` values.

PyYAML implements YAML 1.1, and two of its rules surprise everyone who writes a study file:
`1e-5` (an exponent without a dot) is text, so `lr: 1e-5` fails as "not a number"; and `on`,
`off`, `yes`, `no` are booleans, so `dynamics: off` arrives as False and is refused. This
loader reads those as YAML 1.2 does: a number written with an exponent is a number, and only
`true` and `false` are booleans. A setting that is a boolean still takes the words (see
`bool_word`), so a file written for YAML 1.1 keeps its meaning.

The loader is PyYAML's safe loader otherwise (plain data only, no Python objects), with the
text parsed and composed by libyaml (PyYAML's C extension, in PyYAML's wheels), about ten times
faster than PyYAML's Python parser. The study package composes files through `Loader` to keep
each field's line; everything else calls `load_yaml` or `parse_value`.

What a file may cost is bounded once it is composed, before any data is built: nesting deeper
than `MAX_DEPTH`, a text longer than `MAX_TEXT` characters, or more than `MAX_NODES` values once
every alias is counted as the values it repeats (a "billion laughs" file is a few lines of
aliases that expand to 10^9 values) is refused as a YAML error at its line. Depth and the count
of values as written are checked from the parser's events first, before any node is built, so a
flat list of a million values is refused at its 50,001st. How many bytes a file may have is
checked before it is read (trainables/input_files.py).
"""

from __future__ import annotations

import re
from itertools import chain
from typing import Any

import yaml

try:
    from yaml.cyaml import CParser
except ImportError:  # PyYAML built from source without libyaml's headers
    raise ImportError("PyYAML has no libyaml here; install PyYAML's wheel") from None
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

BOOL_TAG = "tag:yaml.org,2002:bool"
FLOAT_TAG = "tag:yaml.org,2002:float"

# YAML 1.2's core booleans; YAML 1.1's yes/no/on/off stay text
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
# PyYAML's floats with the exponent's sign optional, plus 1e-5 (exponent, no dot)
_FLOAT = re.compile(
    r"""^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
    |[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)

# the words a boolean setting takes besides true/false (YAML 1.1 read them as booleans)
BOOL_WORDS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}


MAX_DEPTH = 32  # levels of nesting; the shipped studies use 7
MAX_TEXT = 4096  # characters of one value: the longest path a file system takes (PATH_MAX)
MAX_NODES = 50_000  # values, each alias counted as all the values it repeats
_TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep"


class YamlLimitError(yaml.MarkedYAMLError):
    """A document beyond what a settings file may cost (see the module docstring)."""


class Loader(CParser, SafeConstructor, Resolver):
    """PyYAML's safe loader with YAML 1.2's booleans and numbers, and bounded cost (see the
    module docstring)."""

    def __init__(self, text: str) -> None:
        # PyYAML's reader refuses a control character (a NUL, say) with its position; libyaml
        # would refuse it too, but later and without saying which character
        yaml.reader.Reader(text)
        self.source_text = text
        CParser.__init__(self, text)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    def get_single_node(self) -> yaml.Node | None:
        try:
            _count_events(self.source_text)
            node = super().get_single_node()
        except yaml.scanner.ScannerError as err:
            # libyaml stops at 1,000 levels while it scans ahead, before the cost is checked
            if "maximum nesting depth" not in (err.problem or ""):
                raise
            raise YamlLimitError(None, None, _TOO_DEEP, err.problem_mark) from None
        if node is not None:
            _Cost().of(node, 0)
        return node


_NODE_EVENTS = (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)


def _count_events(text: str) -> None:
    """Refuse a document nested too deep or of too many values from libyaml's events, before
    any node is built: composing builds every node of the document first, which for a flat
    list of a million values costs seconds and hundreds of MiB before `_Cost` could refuse it.
    Each value is one event (an alias one, though it stands for more), so this stops at the
    value past the limit, whatever the text's length; `_Cost` then counts the aliases."""
    parser = CParser(text)
    try:
        values = depth = 0
        while (event := parser.get_event()) is not None:
            if isinstance(event, _NODE_EVENTS):
                if depth >= MAX_DEPTH:
                    raise YamlLimitError(None, None, _TOO_DEEP, event.start_mark)
                values += 1
                if values > MAX_NODES:
                    raise YamlLimitError(None, None, f"more than {MAX_NODES} values",
                                         event.start_mark)  # fmt: skip
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            elif isinstance(event, yaml.StreamEndEvent):
                break
    finally:
        parser.dispose()


class _Cost:
    """The cost of a composed document, counted once per node: libyaml composes an alias as the
    very node it names, so a billion-laughs file is a small graph that this walk never
    expands. An alias counts as all the values of its node, and as its node's depth."""

    def __init__(self) -> None:
        self.sizes: dict[int, int] = {}  # values a node stands for, aliases expanded
        self.open: set[int] = set()  # nodes whose children are being counted

    def of(self, node: yaml.Node, depth: int) -> int:
        if depth >= MAX_DEPTH:
            raise YamlLimitError(None, None, _TOO_DEEP, node.start_mark)
        if isinstance(node, yaml.ScalarNode):
            if len(node.value) > MAX_TEXT:
                raise YamlLimitError(None, None, f"a value of {len(node.value)} characters; "
                                     f"at most {MAX_TEXT}", node.start_mark)  # fmt: skip
            return 1
        self.open.add(id(node))
        children = node.value if isinstance(node, yaml.SequenceNode) else chain(*node.value)
        size = 1
        for child in children:
            known = self.sizes.get(id(child))
            if known is None:
                if id(child) in self.open:  # an alias inside the value it names
                    raise YamlLimitError(None, None, "a recursive alias", child.start_mark)
                known = self.of(child, depth + 1)
            size += known
        self.open.discard(id(node))
        if size > MAX_NODES:
            raise YamlLimitError(None, None, f"more than {MAX_NODES} values once its aliases "
                                 "are expanded", node.start_mark)  # fmt: skip
        self.sizes[id(node)] = size
        return size


Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (BOOL_TAG, FLOAT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Loader.add_implicit_resolver(BOOL_TAG, _BOOL, list("tTfF"))
Loader.add_implicit_resolver(FLOAT_TAG, _FLOAT, list("-+0123456789."))


def load_yaml(text: str) -> Any:
    """The data of one YAML document (None for an empty one)."""
    loader = Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def parse_value(text: str) -> Any:
    """A command-line value read as YAML: `5` an integer, `1e-5` a number, `off` text,
    `[full, full-1]` a list, `null` nothing."""
    return load_yaml(text)


def bool_word(value: Any) -> bool | None:
    """A boolean setting's value: a YAML boolean, or one of yes/no/on/off/true/false in any
    case; None when `value` is neither."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return BOOL_WORDS.get(value.strip().lower())
    return None


def as_flag(value: Any) -> Any:
    """A boolean setting's value as a bool where it is a YAML boolean or a yes/no/on/off
    word; anything else as given, for the setting's own check to refuse in one line."""
    word = bool_word(value)
    return value if word is None else word
