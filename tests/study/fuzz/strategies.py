"""Inputs a new user might write: values of every type, long strings, deep nesting, and the
mutations of a study file's data tree (drop, rename, retype, duplicate a key)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from study.spec.keys import FACTORS, TOP_LEVEL_KEYS

# words a study file uses, so that mutations often make a near-valid file
WORDS = (
    *TOP_LEVEL_KEYS, *FACTORS, "full", "full-1", "full-2", "best", "minilm", "tiny",
    "loguniform", "uniform", "int", "choice", "max", "min", "dev_f1", "dev_loss", "test_f1",
    "wnut16", "embedded", "train", "dev", "test", "extra", "explore", "confirm", "samples",
    "asha", "select", "heads", "one_head_in_blocks", "baseline", "low", "high", "type",
    "values", "as_o", "error", "tag_map", "unseen", "conll", "hf", "split", "on", "off",
    "yes", "no", "null", "~", "-1", "1e-5", ".inf", "", " ",
)  # fmt: skip

# a character of a command-line argument: any but NUL (the C strings of argv cannot hold it)
ARG_TEXT = st.characters(exclude_characters="\x00")

long_strings = st.builds(
    lambda char, n: char * n, st.sampled_from(["a", "/", "é", "x/", "../", " "]),
    st.integers(200, 5000),
)  # fmt: skip
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 70),
    st.integers(),
    st.floats(),
    st.sampled_from(WORDS),
    st.text(max_size=12),
    long_strings,
)
keys = st.one_of(st.sampled_from(WORDS), st.text(max_size=8), st.integers(-2, 5))
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=8,
)


def nested(value: Any, depth: int, as_list: bool) -> Any:
    for _ in range(depth):
        value = [value] if as_list else {"a": value}
    return value


deep = st.builds(nested, scalars, st.integers(10, 60), st.booleans())

Path = tuple[Any, ...]


def paths(tree: Any, at: Path = ()) -> list[Path]:
    """Every path into `tree` (mapping keys and list indices), the root excluded."""
    out: list[Path] = []
    if isinstance(tree, dict | list):
        for key, child in tree.items() if isinstance(tree, dict) else enumerate(tree):
            out.append((*at, key))
            out.extend(paths(child, (*at, key)))
    return out


def _copied_along(tree: Any, path: Path) -> tuple[Any, Any]:
    """A copy of `tree` whose containers along `path` are new (the rest shared: it is never
    changed in place), and the new parent of `path`'s last key in it."""
    top = parent = dict(tree) if isinstance(tree, dict) else list(tree)
    for part in path[:-1]:
        child = parent[part]
        parent[part] = parent = dict(child) if isinstance(child, dict) else list(child)
    return top, parent


def mutate(tree: Any, path: Path, op: str, value: Any, new_key: Any) -> Any:
    """A copy of `tree` with one mutation at `path` (`tree` itself is left as it was)."""
    tree, parent = _copied_along(tree, path)
    last = path[-1]
    if op == "drop":
        del parent[last]
    elif op == "rename" and isinstance(parent, dict):
        parent[new_key] = parent.pop(last)
    elif op == "wrap":  # a scalar become a list or mapping, or the other way round
        old = parent[last]
        parent[last] = [old] if not isinstance(old, list) else {"value": old}
    elif op == "unwrap" and isinstance(parent[last], dict | list) and parent[last]:
        old = parent[last]
        parent[last] = next(iter(old.values())) if isinstance(old, dict) else old[0]
    else:  # retype, and the ops that do not apply here
        parent[last] = value
    return tree


OPS = ("drop", "rename", "retype", "retype", "wrap", "unwrap")
