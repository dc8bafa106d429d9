"""The `data:` config: each kind of source in its own module, found by its key, and the
inputs a study's data fingerprint is made from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from trainables.data.sources import data_inputs, load_checked_splits, load_splits, split_source
from trainables.data.sources._kinds import SPLIT_KINDS, SplitSource
from trainables.data.sources.conll import ConllSource
from trainables.data.sources.embedded import EmbeddedSource, wnut16_path
from trainables.data.sources.huggingface import HuggingFaceSource
from trainables.data.types import TaggedSentence
from trainables.errors import ConfigError, DataError


def test_every_module_of_the_package_registers_its_kind():
    from trainables.data.sources._kinds import CORPUS_KINDS

    # in module-name order, so a mapping naming two kinds is read as the first (conll)
    assert list(SPLIT_KINDS.items()) == [("conll", ConllSource), ("hf", HuggingFaceSource)]
    assert list(CORPUS_KINDS.items()) == [("embedded", EmbeddedSource)]


def test_entries_are_dispatched_by_their_key():
    assert split_source("a.txt", "train") == ConllSource("a.txt")
    assert split_source({"conll": "b.txt", "strip_lang_prefix": 1}, "dev") == ConllSource(
        "b.txt", True
    )
    source = split_source({"hf": "conll2003", "split": "test", "config": "c"}, "test")
    assert source == HuggingFaceSource("conll2003", "test", config_name="c")


def test_an_entry_of_no_kind_lists_every_form_in_one_line():
    with pytest.raises(ConfigError) as err:
        split_source({"csv": "x.csv"}, "extra.web")
    assert str(err.value) == (
        "data.extra.web: {'csv': 'x.csv'} is not a data source; give a CoNLL file path, "
        "{conll: PATH}, or {hf: NAME_OR_PATH, split: SPLIT}"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"train": "a"}, r"missing split\(s\) \['dev', 'test'\]"),
        ({"embedded": "wnut17"}, r"data.embedded: 'wnut17' is not one of \['wnut16'\]"),
        ({"embedded": ["wnut16"]}, r"data.embedded: \['wnut16'\] is not one of"),
        ({"embedded": "wnut16", "extra": ["x"]}, r"data.extra: \['x'\] is not a mapping"),
        ({"embeded": "wnut16"}, r"unknown key\(s\) \['embeded'\]; known: \['dev', 'embedded'"),
        # a file beside a corpus was ignored before: the run trained on the corpus
        (
            {"embedded": "wnut16", "train": "/nonexistent/train.txt"},
            r"^data: train given beside embedded, whose corpus has its own splits; set "
            r"data.embedded=null to read the files$",
        ),
    ],
)
def test_bad_data_configs_are_one_line_config_errors(data, message):
    with pytest.raises(ConfigError, match=message):
        data_inputs(data)


def test_a_new_kind_is_one_subclass():
    """What a new module under trainables/data/sources/ would hold, and all it needs."""

    @dataclass(frozen=True)
    class Listed(SplitSource):
        key = "listed"
        forms = ("{listed: [WORD/TAG, ...]}",)

        items: tuple[str, ...]

        @classmethod
        def from_entry(cls, entry, where):
            return cls(tuple(entry["listed"]))

        def sentences(self):
            words, tags = zip(*(item.split("/") for item in self.items), strict=True)
            return [TaggedSentence(words, tags, "listed")]

    try:
        data = {s: {"listed": ["Ann/B-PER", "sings/O"]} for s in ("train", "dev", "test")}
        splits, labels = load_checked_splits(data)
        assert splits.dev[0].words == ("Ann", "sings")
        assert labels.labels == ("O", "B-PER", "I-PER")
        with pytest.raises(ConfigError, match=r"or \{listed: \[WORD/TAG, \.\.\.\]\}$"):
            split_source(5, "train")
    finally:
        del SPLIT_KINDS["listed"]


def test_a_key_claimed_twice_is_refused():
    with pytest.raises(TypeError, match="'conll' is claimed by two kinds"):

        class Again(ConllSource):
            key = "conll"


def test_extra_sets_keep_their_names_and_nulls_mean_unset(tiny_corpus):
    data = dict(tiny_corpus) | {"extra": {"train": tiny_corpus["dev"]}, "embedded": None}
    splits = load_splits(data)
    assert list(splits.extra) == ["train"] and splits.extra["train"] == splits.dev


def test_a_hub_source_names_its_study_field_in_errors(tmp_path):
    with pytest.raises(DataError, match=r"^data\.extra\.web\.hf: cannot load dataset "):
        split_source({"hf": str(tmp_path / "absent")}, "extra.web").sentences()


def test_fingerprint_inputs_are_the_files_read_and_the_names_given(tiny_corpus):
    embedded = data_inputs({"embedded": "wnut16", "extra": {"x": tiny_corpus["dev"]}})
    assert embedded.corpus.recorded_name() == "embedded:wnut16"
    assert embedded.corpus.files() == [wnut16_path()]
    assert embedded.files() == [wnut16_path(), Path(tiny_corpus["dev"])]
    files = data_inputs(
        {
            "train": tiny_corpus["train"],
            "dev": {"conll": tiny_corpus["dev"]},
            "test": {"hf": "conll2003", "split": "test"},
            "extra": {"web": {"hf": "wnut_17"}},
        }
    )
    assert files.corpus is None
    assert files.files() == [Path(tiny_corpus["train"]), Path(tiny_corpus["dev"])]
    assert files.recorded_names() == ["hf:conll2003", "hf:wnut_17"]
