"""The one way this project reads YAML: study files, trial configs and `--set KEY=VALUE` values.

PyYAML implements YAML 1.1, and two of its rules surprise everyone who writes a study file:
`1e-5` (an exponent without a dot) is text, so `lr: 1e-5` fails as "not a number"; and `on`,
`off`, `yes`, `no` are booleans, so `dynamics: off` arrives as False and is refused. This
loader reads those as YAML 1.2 does: a number written with an exponent is a number, and only
`true` and `false` are booleans. A setting that is a boolean still takes the words (see
`bool_word`), so a file written for YAML 1.1 keeps its meaning.

The loader is PyYAML's safe loader otherwise (plain data only, no Python objects). The
study package composes files through `Loader` to keep each field's line; everything else calls
`load_yaml` or `parse_value`.

What a file may cost is bounded while it is composed, before any data is built: nesting deeper
than `MAX_DEPTH`, a text longer than `MAX_TEXT` characters, or more than `MAX_NODES` values once
every alias is counted as the values it repeats (a "billion laughs" file is a few lines of
aliases that expand to 10^9 values) is refused as a YAML error at its line.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

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


class YamlLimitError(yaml.MarkedYAMLError):
    """A document beyond what a settings file may cost (see the module docstring)."""


class Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's booleans and numbers, and bounded cost (see the
    module docstring)."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        sizes: dict[int, int] = self.__dict__.setdefault("_sizes", {})
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if id(node) not in sizes:  # the alias is inside the value it names
                raise YamlLimitError(None, None, "a recursive alias", event.start_mark)
            return node  # counted as all the values of the node it names
        if self._depth >= MAX_DEPTH:
            raise YamlLimitError(
                None, None, f"nested more than {MAX_DEPTH} levels deep", event.start_mark
            )
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        sizes[id(node)] = _size(node, sizes)
        if sizes[id(node)] > MAX_NODES:
            raise YamlLimitError(None, None, f"more than {MAX_NODES} values once its aliases "
                                 "are expanded", event.start_mark)  # fmt: skip
        return node


def _size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many values `node` stands for, its children's counts being known already."""
    if isinstance(node, yaml.ScalarNode):
        if len(node.value) > MAX_TEXT:
            raise YamlLimitError(None, None, f"a value of {len(node.value)} characters; at "
                                 f"most {MAX_TEXT}", node.start_mark)  # fmt: skip
        return 1
    if isinstance(node, yaml.SequenceNode):
        return 1 + sum(sizes[id(child)] for child in node.value)
    return 1 + sum(sizes[id(key)] + sizes[id(value)] for key, value in node.value)


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
