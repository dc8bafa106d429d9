"""Label maps for evaluation sets from another domain: `tag_map` renames a set's entity types to
training's (`{geo-loc: location}`, applied to B- and I- alike), and `unseen` says what becomes
of gold entities whose type training never shows: `error` (the default) refuses the set,
`as_o` turns them into O. Both are written in a data entry beside its source
(`extra: {wnut17: {conll: PATH, tag_map: {...}, unseen: as_o}}`).

A cross-domain score must never flatter silently, so every set with a label map reports how
many gold entities it had, how many the map renamed and how many it dropped (`Relabelled`).
"""

from __future__ import annotations

import difflib
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from trainables.data.types import TaggedSentence
from trainables.errors import ConfigError, DataError

log = logging.getLogger(__name__)

KEYS = {  # an evaluation entry's label map, with what each key takes and is for
    "tag_map": "a mapping of this set's entity type: training's type: types renamed (B- and "
    "I- alike)",
    "unseen": "`error` (default: the set is refused) or `as_o`: what becomes of gold entities "
    "of a type training never shows",
}
UNSEEN = ("error", "as_o")
TRAIN = "train"


def _closest(value: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(value, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _check_type_name(name: Any, where: str, value: Any) -> None:
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise ConfigError(f"{where}: {value!r} is not allowed: an entity type such as location")
    if name.startswith(("B-", "I-")):
        raise ConfigError(
            f"{where}: {value!r} is not allowed: give the type without B-/I- "
            f"({name[2:]!r}); the map renames both tags of a type"
        )


@dataclass(frozen=True)
class LabelRules:
    """A set's label map as written: `tag_map` pairs (set type, training type) and `unseen`."""

    tag_map: tuple[tuple[str, str], ...] = ()
    unseen: str = "error"

    @classmethod
    def from_entry(cls, entry: dict[str, Any], where: str) -> LabelRules | None:
        """The rules a data entry gives at `data.<where>`, checked in form; None without any."""
        if not any(key in entry for key in KEYS):
            return None
        if where == TRAIN:
            raise ConfigError(
                f"data.{where}.{next(k for k in KEYS if k in entry)}: not allowed on the "
                "training split: training's types are the label set; give it on dev, test "
                "or an extra set"
            )
        return cls(_tag_map(entry.get("tag_map"), where), _unseen(entry.get("unseen"), where))

    def recorded(self, where: str) -> str:
        """How the data fingerprint records the rules: they change what a trial scores."""
        pairs = ",".join(f"{a}>{b}" for a, b in self.tag_map)
        return f"{where}:tag_map={{{pairs}}}:unseen={self.unseen}"


def _tag_map(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    field = f"data.{where}.tag_map"
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ConfigError(
            f"{field}: {value!r} is not allowed: a mapping of this set's entity types to "
            "training's, e.g. {geo-loc: location}"
        )
    for source, target in value.items():
        _check_type_name(source, field, source)
        _check_type_name(target, f"{field}.{source}", target)
    return tuple(value.items())


def _unseen(value: Any, where: str) -> str:
    value = "error" if value is None else value
    if value not in UNSEEN:
        raise ConfigError(
            f"data.{where}.unseen: {value!r} is not allowed: one of {', '.join(UNSEEN)} "
            f"(as_o turns gold entities of types training never shows into O)"
            f"{_closest(str(value), UNSEEN)}"
        )
    return value


@dataclass(frozen=True)
class Relabelled:
    """Gold entities of one evaluation set: all it had, those renamed, those dropped as O."""

    entities: int
    mapped: int
    dropped: int

    def metrics(self, name: str) -> dict[str, float]:
        return {
            f"{name}_entities": float(self.entities),
            f"{name}_entities_mapped": float(self.mapped),
            f"{name}_entities_dropped": float(self.dropped),
        }

    def log(self, where: str) -> None:
        """The set's line in the log: said once its data has passed every check, so that a
        refusal stays one line."""
        log.info(
            "data.%s: %d gold entities, %d renamed by its tag_map, %d of types training never "
            "shows made O", where, self.entities, self.mapped, self.dropped,
        )  # fmt: skip


def _set_types(sentences: list[TaggedSentence]) -> Counter[str]:
    """Entities per type (IOB2: an entity starts at its B- tag)."""
    return Counter(tag[2:] for s in sentences for tag in s.tags if tag.startswith("B-"))


class LabelMapError(DataError):
    """A label map naming a type the set or training does not have, found once the data is
    read: `path` is the field in the study's `data` (`extra`, the set, `tag_map`, the set's
    type), `value` the type named and `allowed` what would do, so the driver can point at the
    study file's line (study/preflight.py). Rebuilt from them when copied or pickled."""

    def __init__(self, path: tuple[str, ...], value: str, allowed: str):
        self.path, self.value, self.allowed = tuple(path), value, allowed
        super().__init__(f"data.{'.'.join(path)}: {value!r} is not allowed: {allowed}")

    def __reduce__(self):
        return type(self), (self.path, self.value, self.allowed)


def _check_rules(rules: LabelRules, where: str, found: Counter[str], trained: set[str]) -> None:
    field = (*where.split(".", 1), "tag_map")  # `extra.<set>` or a split's name
    for source, target in rules.tag_map:
        if source not in found:
            raise LabelMapError(
                (*field, source), source, f"the set has no entities of that type (its types: "
                f"{', '.join(sorted(found)) or 'none'}){_closest(source, found)}",
            )  # fmt: skip
        if target not in trained:
            raise LabelMapError(
                (*field, source), target, f"training has the types "
                f"{', '.join(sorted(trained))}{_closest(target, trained)}",
            )  # fmt: skip


def relabel(
    sentences: list[TaggedSentence], rules: LabelRules, where: str, trained: set[str]
) -> tuple[list[TaggedSentence], Relabelled]:
    """The set with its types renamed and, under `as_o`, entities of types outside `trained`
    (training's types) made O; a type left unseen under `error` is for the label map's own
    check to refuse, naming the file and line."""
    found = _set_types(sentences)
    _check_rules(rules, where, found, trained)
    renamed = dict(rules.tag_map)
    out = []
    for sentence in sentences:
        tags = []
        for tag in sentence.tags:
            if tag != "O":
                kind = renamed.get(tag[2:], tag[2:])
                drop = rules.unseen == "as_o" and kind not in trained
                tag = "O" if drop else f"{tag[:2]}{kind}"
            tags.append(tag)
        out.append(TaggedSentence(sentence.words, tuple(tags), sentence.origin))
    mapped = sum(found[source] for source in renamed)
    counts = Relabelled(found.total(), mapped, found.total() - _set_types(out).total())
    return out, counts
