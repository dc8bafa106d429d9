"""Turn the `data` part of a trial config into train/dev/test (and extra) sentence lists.

A split is given as a CoNLL file path, `{conll: PATH, strip_lang_prefix: bool}`, or
`{hf: NAME_OR_PATH, split: ..., config: ..., tokens_column: ..., tags_column: ...}`;
`{embedded: wnut16}` supplies all three splits from the data package that ships with the
project, so a laptop run needs no download.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainables.data.corpus import LabelMap, embedded_wnut16, load_hf_dataset, read_conll
from trainables.data.types import TaggedSentence
from trainables.errors import ConfigError, DataError

EMBEDDED = {"wnut16": embedded_wnut16}
SPLITS = ("train", "dev", "test")


@dataclass
class Splits:
    train: list[TaggedSentence]
    dev: list[TaggedSentence]
    test: list[TaggedSentence]
    extra: dict[str, list[TaggedSentence]] = field(default_factory=dict)


def load_source(source: Any, where: str) -> list[TaggedSentence]:
    if isinstance(source, str):
        return read_conll(source)
    if isinstance(source, dict) and "conll" in source:
        return read_conll(source["conll"], strip_lang_prefix=bool(source.get("strip_lang_prefix")))
    if isinstance(source, dict) and "hf" in source:
        try:
            return load_hf_dataset(
                source["hf"],
                source.get("split", "train"),
                tokens_column=source.get("tokens_column", "tokens"),
                tags_column=source.get("tags_column", "ner_tags"),
                config_name=source.get("config"),
            )
        except DataError as err:  # name the study field too: several splits may share a name
            raise DataError(f"data.{where}.hf: {err}") from None
    raise ConfigError(
        f"data.{where}: {source!r} is not a data source; give a CoNLL file path, "
        "{conll: PATH}, or {hf: NAME_OR_PATH, split: SPLIT}"
    )


def load_splits(data: dict[str, Any]) -> Splits:
    # A null entry means "not set": a study profile removes an inherited key that way.
    data = {key: value for key, value in data.items() if value is not None}
    known = {"embedded", "train", "dev", "test", "extra"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"data: unknown key(s) {unknown}; known: {sorted(known)}")
    if "embedded" in data:
        name = data["embedded"]
        if name not in EMBEDDED:
            raise ConfigError(f"data.embedded: {name!r} is not one of {sorted(EMBEDDED)}")
        base = EMBEDDED[name]()
    else:
        missing = [s for s in SPLITS if s not in data]
        if missing:
            raise ConfigError(f"data: missing split(s) {missing}; give train, dev and test")
        base = {s: load_source(data[s], s) for s in SPLITS}
    extra = {n: load_source(s, f"extra.{n}") for n, s in (data.get("extra") or {}).items()}
    return Splits(base["train"], base["dev"], base["test"], extra)


def load_checked_splits(data: dict[str, Any]) -> tuple[Splits, LabelMap]:
    """The splits and the label map built from training, refusing data a trial could not
    score: an empty split, or an evaluation tag that training never shows. The study driver
    calls this before it writes anything, so bad data is one line at the prompt instead of a
    column of errored trials."""
    splits = load_splits(data)
    named = {"train": splits.train, "dev": splits.dev, "test": splits.test, **splits.extra}
    for name, sentences in named.items():
        if not sentences:
            raise DataError(f"data.{name}: the split has no sentences")
    label_map = LabelMap.from_sentences(splits.train)
    for name, sentences in named.items():
        if name != "train":
            label_map.check(sentences, name)
    return splits, label_map
