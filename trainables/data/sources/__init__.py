"""Turn the `data` part of a trial config into train/dev/test (and extra) sentence lists.

A split is given as a CoNLL file path, `{conll: PATH, strip_lang_prefix: bool}`, or
`{hf: NAME_OR_PATH, split: ..., config: ..., tokens_column: ..., tags_column: ...}`;
`{embedded: wnut16}` supplies all three splits from the data package that ships with the
project, so a laptop run needs no download. An evaluation entry of any kind may add a label
map, `tag_map` and `unseen` (see `trainables.data.relabel`). `untyped: true` beside the
sources keeps the entity spans of every split and drops their types (B-x/I-x become
B-ENT/I-ENT): a span-detection task made from any corpus.

Each kind of source is one module of this package, and every module here is imported below:
defining a `SplitSource` or `CorpusSource` subclass registers its key (see `_kinds`), so a new
kind of source is one new module and no edit here.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainables.data import relabel
from trainables.data.labels import LabelMap
from trainables.data.sources._kinds import CORPUS_KINDS, SPLIT_KINDS, CorpusSource, SplitSource
from trainables.data.tags import untyped
from trainables.data.types import TaggedSentence
from trainables.errors import ConfigError, DataError
from trainables.yaml_reading import bool_word

SPLITS = ("train", "dev", "test")
UNTYPED = "untyped"  # an option of the whole `data` mapping, beside its sources
# The keys of `data` besides the corpus kinds' (`embedded`), with what each takes and is for
# (docs/study-keys.md); an entry's own keys are its kind's `entry_keys` and `relabel.KEYS`.
DATA_KEYS = {
    "train": "a data source (a path, `{conll: ...}` or `{hf: ...}`): the training split, "
    "unless a corpus gives all three",
    "dev": "a data source: the split evaluated during training and by `until_plateau`",
    "test": "a data source: the split scored once, at the end",
    "extra": "a mapping of set name: data source: extra evaluation sets (another domain or "
    "language), scored at the end and tabulated per arm",
    UNTYPED: "true or false (default): keep every split's entity spans, drop their types "
    "(B-x/I-x become B-ENT/I-ENT)",
}


def _import_every_kind() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


_import_every_kind()


@dataclass
class Splits:
    train: list[TaggedSentence]
    dev: list[TaggedSentence]
    test: list[TaggedSentence]
    extra: dict[str, list[TaggedSentence]] = field(default_factory=dict)
    # by field (`dev`, `extra.NAME`): the label maps given, and what each did once applied
    rules: dict[str, relabel.LabelRules] = field(default_factory=dict)
    relabelled: dict[str, relabel.Relabelled] = field(default_factory=dict)

    def named(self) -> dict[str, list[TaggedSentence]]:
        """Every split by its field: train, dev, test and `extra.NAME`."""
        fixed = {"train": self.train, "dev": self.dev, "test": self.test}
        return fixed | {f"extra.{name}": sentences for name, sentences in self.extra.items()}

    def replace(self, where: str, sentences: list[TaggedSentence]) -> None:
        if where.startswith("extra."):
            self.extra[where.removeprefix("extra.")] = sentences
        else:
            setattr(self, where, sentences)


@dataclass(frozen=True)
class DataInputs:
    """What a `data` config reads, without reading it: enough to fingerprint a study's data."""

    corpus: CorpusSource | None  # the source of train, dev and test, when one gives all three
    splits: dict[str, SplitSource]  # by field: `extra.NAME`, and train, dev, test if no corpus
    rules: dict[str, relabel.LabelRules] = field(default_factory=dict)  # label maps, by field
    untyped: bool = False  # every split's entity types dropped (B-x/I-x become B-ENT/I-ENT)

    def files(self) -> list[Path]:
        sources = [self.corpus, *self.splits.values()] if self.corpus else self.splits.values()
        return [path for source in sources for path in source.files()]

    def recorded_names(self) -> list[str]:
        """Dataset names as given, and the label maps, which change what a trial scores."""
        names = [name for source in self.splits.values() for name in source.recorded_names()]
        names += [UNTYPED] if self.untyped else []
        return names + [rules.recorded(where) for where, rules in self.rules.items()]


def split_source(entry: Any, where: str) -> SplitSource:
    """The source a split's entry names: a plain string is a path of the kind that reads
    paths, a mapping is named by the first registered key it holds (its label map aside)."""
    if isinstance(entry, dict):
        entry = {key: value for key, value in entry.items() if key not in relabel.KEYS}
    for key, kind in SPLIT_KINDS.items():
        if (isinstance(entry, str) and kind.reads_bare_paths) or (
            isinstance(entry, dict) and key in entry
        ):
            return kind.from_entry(entry, where)
    forms = [form for kind in SPLIT_KINDS.values() for form in kind.forms]
    raise ConfigError(
        f"data.{where}: {entry!r} is not a data source; give {', '.join(forms[:-1])}, "
        f"or {forms[-1]}"
    )


def data_inputs(data: dict[str, Any]) -> DataInputs:
    """The sources a `data` config names, checked but not read."""
    # A null entry means "not set": a study profile removes an inherited key that way.
    data = {key: value for key, value in data.items() if value is not None}
    known = {*CORPUS_KINDS, *SPLITS, "extra", UNTYPED}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"data: unknown key(s) {unknown}; known: {sorted(known)}")
    corpus = [kind.from_entry(data[key]) for key, kind in CORPUS_KINDS.items() if key in data]
    if len(corpus) > 1:
        raise ConfigError(f"data: give one of {sorted(CORPUS_KINDS)}, not several")
    beside = [s for s in SPLITS if s in data]
    if corpus and beside:  # a corpus brings its own splits: the files would be ignored
        kind = next(key for key in CORPUS_KINDS if key in data)
        raise ConfigError(f"data: {', '.join(beside)} given beside {kind}, whose corpus has its "
                          f"own splits; set data.{kind}=null to read the files")  # fmt: skip
    missing = [s for s in SPLITS if s not in data]
    if missing and not corpus:
        raise ConfigError(f"data: missing split(s) {missing}; give train, dev and test")
    entries = {} if corpus else {s: data[s] for s in SPLITS}
    extra = data.get("extra") or {}
    if not isinstance(extra, dict):
        raise ConfigError(f"data.extra: {extra!r} is not a mapping of name: data source")
    entries |= {f"extra.{name}": entry for name, entry in extra.items()}
    splits = {where: split_source(entry, where) for where, entry in entries.items()}
    rules = {
        where: found
        for where, entry in entries.items()
        if isinstance(entry, dict) and (found := relabel.LabelRules.from_entry(entry, where))
    }
    return DataInputs(corpus[0] if corpus else None, splits, rules, _untyped(data))


def _untyped(data: dict[str, Any]) -> bool:
    flag = data.get(UNTYPED, False)  # text: yes/no/on/off (trainables/yaml_reading.py)
    value = bool_word(flag) if isinstance(flag, str) else flag
    if not isinstance(value, bool):
        raise ConfigError(f"data.{UNTYPED}: {flag!r} is not allowed: true (every entity type "
                          "becomes ENT) or false")  # fmt: skip
    return value


def load_splits(data: dict[str, Any]) -> Splits:
    """The splits as read, before any label map is applied (that needs training's types)."""
    inputs = data_inputs(data)
    read = {where: source.sentences() for where, source in inputs.splits.items()}
    base = inputs.corpus.splits() if inputs.corpus else read
    extra = {where.removeprefix("extra."): read[where] for where in read if where not in SPLITS}
    splits = Splits(base["train"], base["dev"], base["test"], extra, inputs.rules)
    if inputs.untyped:
        for where, sentences in splits.named().items():
            splits.replace(where, [_spans_only(sentence) for sentence in sentences])
    return splits


def _spans_only(sentence: TaggedSentence) -> TaggedSentence:
    return TaggedSentence(sentence.words, untyped(sentence.tags), sentence.origin)


def load_checked_splits(data: dict[str, Any]) -> tuple[Splits, LabelMap]:
    """The splits, label maps applied, and the label map built from training, refusing data a
    trial could not score: an empty split, a label map naming a type the set or training does
    not have, or an evaluation tag that training never shows (unless its set says
    `unseen: as_o`). The study driver calls this before it writes anything, so bad data is
    one line at the prompt instead of a column of errored trials."""
    splits = load_splits(data)
    for where, sentences in splits.named().items():
        if not sentences:
            raise DataError(f"data.{where}: the split has no sentences")
    label_map = LabelMap.from_sentences(splits.train)
    for where, rules in splits.rules.items():
        kept, splits.relabelled[where] = relabel.relabel(
            splits.named()[where], rules, where, label_map.entity_types()
        )
        splits.replace(where, kept)
    for where, sentences in splits.named().items():
        if where != "train":
            label_map.check(sentences, where.removeprefix("extra."), where)
    for where, counts in splits.relabelled.items():
        counts.log(where)
    return splits, label_map
