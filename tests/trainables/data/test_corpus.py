"""Corpus reading, tag normalisation, label maps, data fractions and the embedded WNUT-16."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainables.data.labels import LabelMap
from trainables.data.sources.conll import read_conll
from trainables.data.sources.embedded import WNUT16_SPLIT_SIZES, embedded_wnut16
from trainables.data.sources.huggingface import load_hf_dataset
from trainables.data.subsets import nested_fraction_indices
from trainables.data.tags import to_iob2
from trainables.data.types import TaggedSentence
from trainables.errors import ConfigError, DataError

SHARED_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"


def write(tmp_path: Path, text: str, name: str = "corpus.txt") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def pairs(sentence: TaggedSentence) -> list[tuple[str, str]]:
    return list(zip(sentence.words, sentence.tags, strict=True))


def sent(*tags: str, origin: str = "") -> TaggedSentence:
    return TaggedSentence(tuple(f"w{i}" for i in range(len(tags))), tuple(tags), origin)


# --------------------------------------------------------------------------- read_conll


def test_two_column_tab_file(tmp_path):
    path = write(tmp_path, "John\tB-PER\nlives\tO\n\nParis\tB-LOC\n")
    first, second = read_conll(path)
    assert pairs(first) == [("John", "B-PER"), ("lives", "O")]
    assert pairs(second) == [("Paris", "B-LOC")]
    assert first.origin == f"{path}:1" and second.origin == f"{path}:4"


def test_four_column_conll2003_style_uses_first_and_last_column(tmp_path):
    text = "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n\nPeter NNP B-NP B-PER\n"
    first, second = read_conll(write(tmp_path, text))
    assert pairs(first) == [("EU", "B-ORG"), ("rejects", "O"), ("German", "B-MISC")]
    assert pairs(second) == [("Peter", "B-PER")]


def test_mixed_separators(tmp_path):
    (only,) = read_conll(write(tmp_path, "New \t NNP\t B-LOC\nYork  NNP \tI-LOC  \n"))
    assert pairs(only) == [("New", "B-LOC"), ("York", "I-LOC")]


def test_whitespace_only_and_single_tab_lines_separate_sentences(tmp_path):
    text = "a\tO\n\t\nb\tO\n   \nc\tO\n \t \r\nd\tO\n"
    sentences = read_conll(write(tmp_path, text))
    assert [s.words for s in sentences] == [("a",), ("b",), ("c",), ("d",)]


def test_docstart_lines_are_skipped(tmp_path):
    text = "-DOCSTART- -X- -X- O\n\nEU NNP B-ORG\n\n-DOCSTART- -X- O\n\nPeter NNP B-PER\n"
    sentences = read_conll(write(tmp_path, text))
    assert [s.words for s in sentences] == [("EU",), ("Peter",)]


def test_lang_prefix_is_stripped_only_when_asked_and_only_when_it_is_a_prefix(tmp_path):
    text = (
        "en:Paris\tB-LOC\nen::\tO\nen:bar:24\tO\nnld:x\tO\n:\tO\na:b\tO\nhttp://t.co\tO\nen:\tO\n"
    )
    path = write(tmp_path, text)
    (plain,) = read_conll(path)
    assert plain.words[0] == "en:Paris"
    (stripped,) = read_conll(path, strip_lang_prefix=True)
    assert stripped.words == ("Paris", ":", "bar:24", "x", ":", "a:b", "http://t.co", "en:")


def test_last_sentence_without_final_blank_line_and_repeated_blank_lines(tmp_path):
    text = "\n\na\tO\n\n\n\nb\tB-PER\nc\tI-PER"
    sentences = read_conll(write(tmp_path, text))
    assert [s.words for s in sentences] == [("a",), ("b", "c")]
    assert sentences[1].origin.endswith(":7")


def test_crlf_and_byte_order_mark_are_tolerated(tmp_path):
    path = tmp_path / "win.txt"
    path.write_bytes("\ufeffa\tO\r\n\r\nb\tB-LOC\r\n".encode())
    assert [pairs(s) for s in read_conll(path)] == [[("a", "O")], [("b", "B-LOC")]]


def test_iob1_file_is_read_as_iob2(tmp_path):
    (only,) = read_conll(write(tmp_path, "John\tI-PER\nSmith\tI-PER\nParis\tI-LOC\n"))
    assert only.tags == ("B-PER", "I-PER", "B-LOC")


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(DataError, match=r"nope\.txt: file not found"):
        read_conll(missing)


def test_one_column_line_names_file_line_and_value(tmp_path):
    path = write(tmp_path, "John\tB-PER\n\nParis\n")
    with pytest.raises(DataError) as err:
        read_conll(path)
    message = str(err.value)
    assert message == f"{path}:3: expected at least 2 columns (word and tag), got 1: 'Paris'"
    assert "\n" not in message


@pytest.mark.parametrize("text", ["", "\n\n \t\n", "-DOCSTART- O\n\n"])
def test_file_without_sentences(tmp_path, text):
    with pytest.raises(DataError, match="no sentences found"):
        read_conll(write(tmp_path, text))


def test_bad_scheme_tag_reports_its_own_line(tmp_path):
    path = write(tmp_path, "John\tB-PER\nSmith\tE-PER\n")
    with pytest.raises(DataError) as err:
        read_conll(path)
    assert str(err.value) == (
        f"{path}:2: tag 'E-PER' is not in the BIO/IOB2 scheme (expected O, B-TYPE or I-TYPE)"
    )


def test_bad_utf8_reports_its_line(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"a\tO\nCaf\xe9\tO\n")
    with pytest.raises(DataError, match=r"latin1\.txt:2: not UTF-8"):
        read_conll(path)


# --------------------------------------------------------------------------- to_iob2


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        (["O", "B-PER", "I-PER", "O"], ["O", "B-PER", "I-PER", "O"]),  # IOB2 unchanged
        (["I-PER", "I-PER", "O", "I-LOC"], ["B-PER", "I-PER", "O", "B-LOC"]),  # IOB1 starts
        (["I-PER", "B-PER", "I-PER"], ["B-PER", "B-PER", "I-PER"]),  # IOB1 adjacent entities
        (["B-PER", "I-LOC", "I-LOC"], ["B-PER", "B-LOC", "I-LOC"]),  # type change starts anew
        (["I-ORG", "I-PER"], ["B-ORG", "B-PER"]),
        (["B-geo-loc", "I-geo-loc"], ["B-geo-loc", "I-geo-loc"]),  # hyphen inside the type
        ([], []),
    ],
)
def test_to_iob2_conversion(tags, expected):
    assert to_iob2(tags) == tuple(expected)


@pytest.mark.parametrize("tag", ["E-PER", "S-LOC", "PER", "B-", "I-", "o", "b-PER", ""])
def test_to_iob2_rejects_other_schemes(tag):
    with pytest.raises(DataError) as err:
        to_iob2(["O", tag], origin="x.txt:3")
    assert str(err.value) == (
        f"x.txt:3: tag {tag!r} is not in the BIO/IOB2 scheme (expected O, B-TYPE or I-TYPE)"
    )


# --------------------------------------------------------------------------- LabelMap


def test_label_map_order_is_o_then_type_then_b_before_i():
    train = [sent("I-PER", "O", "B-LOC", "I-LOC"), sent("B-MISC", "B-ORG", "I-ORG")]
    labels = LabelMap.from_sentences(train)
    assert labels.labels == (
        "O",
        "B-LOC",
        "I-LOC",
        "B-MISC",
        "I-MISC",
        "B-ORG",
        "I-ORG",
        "B-PER",
        "I-PER",
    )
    assert labels.index("O") == 0 and labels.index("I-ORG") == 6
    assert len(labels) == 9
    assert LabelMap.from_sentences(list(reversed(train))) == labels


def test_label_map_adds_i_for_every_b_type_and_always_has_o():
    labels = LabelMap.from_sentences([sent("B-PER", "B-PER")])
    assert labels.labels == ("O", "B-PER", "I-PER")


def test_label_map_round_trips_through_its_dict_keeping_ids():
    original = LabelMap.from_sentences([sent("B-PER", "O", "B-LOC")])
    mapping = original.to_dict()
    assert mapping == {"O": 0, "B-LOC": 1, "I-LOC": 2, "B-PER": 3, "I-PER": 4}
    assert LabelMap.from_labels(list(mapping)) == original
    reordered = LabelMap.from_labels(["O", "B-PER", "I-PER"])
    assert reordered.index("B-PER") == 1  # a saved order is kept, never re-sorted


def test_label_map_rejects_bad_or_duplicate_labels():
    with pytest.raises(DataError, match="not in the BIO/IOB2 scheme"):
        LabelMap.from_labels(["O", "S-PER"])
    with pytest.raises(DataError, match="duplicate"):
        LabelMap.from_labels(["O", "B-PER", "B-PER"])


def test_check_names_tag_split_origin_and_training_tags():
    labels = LabelMap.from_sentences([sent("B-person", "O")])
    labels.check([sent("I-person", "B-person", origin="dev.txt:1")], "dev")  # I- added
    with pytest.raises(DataError) as err:
        labels.check([sent("O"), sent("O", "I-product", origin="dev.txt:9")], "dev")
    assert str(err.value) == (
        "dev.txt:9: tag 'I-product' in the dev split never occurs in training "
        "(training tags: O, B-person, I-person)"
    )


# --------------------------------------------------------------------------- fractions


@pytest.mark.parametrize("seed", [0, 1, 7, 12345])
def test_smaller_fractions_nest_inside_larger_ones(seed):
    n = 1000
    subsets = [set(nested_fraction_indices(n, f, seed)) for f in (0.01, 0.1, 0.5, 1.0)]
    assert [len(s) for s in subsets] == [10, 100, 500, 1000]
    assert subsets[0] <= subsets[1] <= subsets[2] <= subsets[3] == set(range(n))


def test_fraction_indices_are_sorted_deterministic_and_seed_dependent():
    first = nested_fraction_indices(500, 0.1, seed=3)
    assert first == sorted(first) == nested_fraction_indices(500, 0.1, seed=3)
    assert first != nested_fraction_indices(500, 0.1, seed=4)


def test_tiny_fraction_keeps_at_least_one_sentence():
    assert len(nested_fraction_indices(50, 0.001, seed=0)) == 1
    assert nested_fraction_indices(7, 1.0, seed=0) == list(range(7))


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.01, float("nan")])
def test_fraction_outside_zero_one_is_a_config_error(fraction):
    with pytest.raises(ConfigError, match=r"must be in \(0, 1\]"):
        nested_fraction_indices(10, fraction, seed=0)


# --------------------------------------------------------------------------- embedded WNUT-16


def test_embedded_wnut16_has_the_documented_sizes_and_is_a_partition():
    splits = embedded_wnut16()
    assert {name: len(s) for name, s in splits.items()} == WNUT16_SPLIT_SIZES
    assert WNUT16_SPLIT_SIZES == {"train": 1676, "dev": 359, "test": 359}
    origins = [{s.origin for s in splits[name]} for name in ("train", "dev", "test")]
    assert sum(len(o) for o in origins) == 2394  # every sentence, each exactly once
    assert not (origins[0] & origins[1] or origins[0] & origins[2] or origins[1] & origins[2])
    (source,) = {o.rsplit(":", 1)[0] for o in origins[0]}
    assert len(read_conll(source)) == 2394


def test_embedded_wnut16_is_deterministic_and_callers_cannot_poison_it():
    first = embedded_wnut16()
    first["train"].clear()
    first["dev"].reverse()
    second = embedded_wnut16()
    assert len(second["train"]) == WNUT16_SPLIT_SIZES["train"]
    lines = [int(s.origin.rsplit(":", 1)[1]) for s in second["dev"]]
    assert lines == sorted(lines)  # corpus order within a split
    assert second["dev"][0].origin.endswith(":140")  # pinned: the split must never drift


# --------------------------------------------------------------------------- Hugging Face


@pytest.fixture(scope="module")
def saved_datasets(tmp_path_factory) -> dict[str, Path]:
    from datasets import ClassLabel, Dataset, DatasetDict, Features, List, Value

    root = tmp_path_factory.mktemp("hf")
    names = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    class_features = Features(
        {"tokens": List(Value("string")), "ner_tags": List(ClassLabel(names=names))}
    )
    rows = {
        "tokens": [["John", "Smith", "left"], ["-DOCSTART-"], ["Paris"]],
        "ner_tags": [[1, 2, 0], [0], [3]],
    }
    DatasetDict(
        train=Dataset.from_dict(rows, features=class_features),
        validation=Dataset.from_dict(
            {"tokens": [["Rome"]], "ner_tags": [[3]]}, features=class_features
        ),
    ).save_to_disk(root / "classlabel")
    DatasetDict(
        train=Dataset.from_dict({"words": [["Anna", "Bell"]], "tags": [["I-PER", "I-PER"]]})
    ).save_to_disk(root / "strings")
    Dataset.from_dict({"tokens": [["Oslo"]], "ner_tags": [["B-LOC"]]}).save_to_disk(root / "single")
    (root / "jsonl").mkdir()
    (root / "jsonl" / "train.jsonl").write_text('{"tokens": ["Ann"], "ner_tags": ["B-PER"]}\n')
    return {p.name: p for p in root.iterdir()}


def test_hf_saved_dataset_dict_with_classlabel_tags(saved_datasets):
    path = str(saved_datasets["classlabel"])
    train = load_hf_dataset(path, "train")
    assert [pairs(s) for s in train] == [
        [("John", "B-PER"), ("Smith", "I-PER"), ("left", "O")],
        [("Paris", "B-LOC")],
    ]  # the -DOCSTART- row is dropped, as in read_conll
    assert train[1].origin == f"{path}[train][2]"
    assert [s.words for s in load_hf_dataset(path, "validation")] == [("Rome",)]


def test_hf_string_tags_custom_columns_and_iob1(saved_datasets):
    path = str(saved_datasets["strings"])
    (only,) = load_hf_dataset(path, "train", tokens_column="words", tags_column="tags")
    assert pairs(only) == [("Anna", "B-PER"), ("Bell", "I-PER")]


def test_hf_single_saved_dataset_and_json_folder(saved_datasets):
    (oslo,) = load_hf_dataset(str(saved_datasets["single"]), "train")
    assert pairs(oslo) == [("Oslo", "B-LOC")]
    (ann,) = load_hf_dataset(str(saved_datasets["jsonl"]), "train")
    assert pairs(ann) == [("Ann", "B-PER")]


def test_hf_missing_split_lists_available(saved_datasets):
    with pytest.raises(DataError, match=r"no split 'test'; available: train, validation$"):
        load_hf_dataset(str(saved_datasets["classlabel"]), "test")


def test_hf_missing_column_lists_available(saved_datasets):
    with pytest.raises(DataError, match=r"no column 'ner_tags'; available: words, tags$"):
        load_hf_dataset(str(saved_datasets["strings"]), "train", tokens_column="words")


def test_hf_unknown_name_offline_is_a_one_line_data_error(hub_offline):
    with pytest.raises(DataError) as err:
        load_hf_dataset("no-such-user/no-such-ner-dataset", "train")
    message = str(err.value)
    assert message.startswith("cannot load dataset 'no-such-user/no-such-ner-dataset': ")
    assert "\n" not in message


def test_a_hub_whose_name_does_not_resolve_is_read_from_the_cache_only(hub_unresolved, monkeypatch):
    """Without name resolution `datasets` would retry the hub for about 23 s; the dataset is
    instead asked for as in a process started with HF_HUB_OFFLINE=1 (its cache only), the
    error says why, and the libraries' settings are as they were afterwards."""
    import datasets
    import datasets.config
    import huggingface_hub.constants

    seen = []
    real_load = datasets.load_dataset

    def load(*args, **kwargs):
        seen.append((datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", load)
    with pytest.raises(DataError) as err:
        load_hf_dataset("no-such-user/no-such-ner-dataset", "train")
    assert seen == [(True, True)]  # offline while it loaded
    offline = datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE
    assert offline == (False, False)  # and as it was afterwards
    said = f"the hub's host {hub_unresolved} does not resolve here, so only its cache was read"
    assert said in str(err.value)
    assert "\n" not in str(err.value)
    # a name only a folder can have asks no hub, and is not said to be the hub's
    with pytest.raises(DataError) as err:
        load_hf_dataset("./no/such/folder", "train")
    assert "does not resolve" not in str(err.value)
    assert seen[1:] == [(False, False)]  # asked for as it is, not offline


# --------------------------------------------------------------------------- reference corpora


def shared_corpus(relative: str) -> Path:
    path = SHARED_DATA / relative
    if not path.is_file():
        pytest.skip(f"reference corpus {path} is absent (it lives only in this workplace)")
    return path


def test_reads_reference_conll2003_dev():
    sentences = read_conll(shared_corpus("conll2003/dev.txt"))
    assert len(sentences) == 3250
    assert {t[2:] for s in sentences for t in s.tags if t != "O"} == {"PER", "LOC", "ORG", "MISC"}


def test_reads_reference_wikiann_en_dev_without_language_prefixes():
    sentences = read_conll(shared_corpus("wikiann/en/dev.txt"), strip_lang_prefix=True)
    assert len(sentences) == 10000
    assert not any(w.startswith("en:") for s in sentences for w in s.words)


def test_a_dataset_revision_is_passed_to_load_dataset_and_recorded(saved_datasets, monkeypatch):
    """`revision` reaches `datasets.load_dataset` (the real one, recorded on the way), a local
    folder is read as it is whatever the revision says, and the revision is in the name the
    data fingerprint records; one that is not text is refused in one line."""
    import datasets

    from trainables.data.sources.huggingface import HuggingFaceSource
    from trainables.errors import DataError

    calls, real = [], datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: calls.append(k) or real(*a, **k))
    path = str(saved_datasets["jsonl"])
    source = HuggingFaceSource.from_entry({"hf": path, "revision": "v1.0"}, "train")
    assert [pairs(s) for s in source.sentences()] == [[("Ann", "B-PER")]]
    assert calls[-1]["revision"] == "v1.0"
    assert source.recorded_names() == [f"hf:{path}@v1.0"]
    assert HuggingFaceSource.from_entry({"hf": path}, "train").recorded_names() == [f"hf:{path}"]
    with pytest.raises(DataError, match=r"^data.train.revision: 3 is not allowed: a commit"):
        HuggingFaceSource.from_entry({"hf": path, "revision": 3}, "train")
