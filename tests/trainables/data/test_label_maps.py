"""Label maps for evaluation sets from another domain (`tag_map`, `unseen` in a data entry):
types renamed on B- and I- alike, unseen types refused or made O, every count reported, and
every mistake one line naming the field."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from study.fingerprint import data_fingerprint
from tests.conftest import OTHER_DOMAIN_MAP, other_domain, synthetic_sentences, write_conll
from tests.study_helpers import REPO
from trainables.data.relabel import LabelMapError
from trainables.data.sources import data_inputs, load_checked_splits
from trainables.errors import ConfigError, DataError


@pytest.fixture
def renamed(tmp_path) -> tuple[str, list]:
    sentences = other_domain(synthetic_sentences(30, 7))
    return str(write_conll(tmp_path / "renamed.txt", sentences)), sentences


def with_extra(corpus: dict, entry: dict) -> dict:
    return {**corpus, "extra": {"other": entry}}


def entity_types(sentences) -> Counter:
    return Counter(tag[2:] for s in sentences for tag in s.tags if tag.startswith("B-"))


def test_types_are_renamed_and_unseen_ones_made_o(tiny_corpus, renamed):
    path, written = renamed
    entry = {"conll": path, "tag_map": OTHER_DOMAIN_MAP, "unseen": "as_o"}
    splits, labels = load_checked_splits(with_extra(tiny_corpus, entry))
    found = Counter(tag[2:] for s in written for _, tag in s if tag.startswith("B-"))
    counts = splits.relabelled["extra.other"]
    assert (counts.entities, counts.mapped, counts.dropped) == (
        found.total(), found["person"] + found["place"], found["company"])  # fmt: skip
    assert entity_types(splits.extra["other"]) == Counter(
        {"PER": found["person"], "LOC": found["place"]}
    )
    for sentence, source in zip(splits.extra["other"], written, strict=True):
        for tag, (_, old) in zip(sentence.tags, source, strict=True):
            expected = {"person": "PER", "place": "LOC"}.get(old[2:])
            assert tag == ("O" if old == "O" or expected is None else f"{old[:2]}{expected}")
    assert splits.relabelled.keys() == {"extra.other"}  # sets without a map report nothing


def test_an_unseen_type_is_refused_by_default_with_the_remedy(tiny_corpus, renamed):
    path, _ = renamed
    entry = {"conll": path, "tag_map": OTHER_DOMAIN_MAP}  # company is neither mapped nor dropped
    with pytest.raises(DataError) as err:
        load_checked_splits(with_extra(tiny_corpus, entry))
    message = str(err.value)
    assert "tag 'B-company' in the other split never occurs in training" in message
    assert "data.extra.other.tag_map" in message and "data.extra.other.unseen: as_o" in message


@pytest.mark.parametrize(
    ("entry", "error", "message"),
    [
        ({"tag_map": {"person": "PRE"}}, DataError,
         "data.extra.other.tag_map.person: 'PRE' is not allowed: training has the types LOC, "
         "ORG, PER; did you mean 'PER'?"),
        ({"tag_map": {"persno": "PER"}}, DataError,
         "data.extra.other.tag_map.persno: 'persno' is not allowed: the set has no entities of "
         "that type (its types: company, person, place); did you mean 'person'?"),
        ({"unseen": "as-o"}, ConfigError,
         "data.extra.other.unseen: 'as-o' is not allowed: one of error, as_o"),
        ({"tag_map": {"B-person": "PER"}}, ConfigError, "give the type without B-/I-"),
        ({"tag_map": ["person"]}, ConfigError, "data.extra.other.tag_map: ['person'] is not"),
    ],
)  # fmt: skip
def test_bad_label_maps_are_one_line_naming_the_field(tiny_corpus, renamed, entry, error, message):
    with pytest.raises(error) as err:
        load_checked_splits(with_extra(tiny_corpus, {"conll": renamed[0], **entry}))
    assert message in str(err.value) and "\n" not in str(err.value)
    if isinstance(err.value, LabelMapError):  # the field and value the driver puts at its line
        again = pickle.loads(pickle.dumps(err.value))  # as Ray carries a trial's error
        assert (again.path, again.value, str(again)) == (err.value.path, err.value.value, message)
        assert message.startswith("data." + ".".join(again.path) + f": {again.value!r} ")


def test_training_takes_no_label_map(tiny_corpus):
    data = {**tiny_corpus, "train": {"conll": tiny_corpus["train"], "unseen": "as_o"}}
    with pytest.raises(ConfigError, match=r"data\.train\.unseen: not allowed on the training"):
        data_inputs(data)


def test_the_fingerprint_changes_with_a_label_map_only(tiny_corpus, renamed):
    plain = with_extra(tiny_corpus, {"conll": renamed[0]})
    mapped = with_extra(tiny_corpus, {"conll": renamed[0], "tag_map": OTHER_DOMAIN_MAP})
    dropping = with_extra(tiny_corpus, {**mapped["extra"]["other"], "unseen": "as_o"})
    prints = [data_fingerprint(d) for d in (plain, mapped, dropping)]
    assert len(set(prints)) == 3
    assert prints[0].count(";") == 0  # no label map: the files' hash alone, as before


@pytest.mark.slow  # over ~7 s: the slow tier
def test_the_trial_reports_what_the_map_did_through_the_command_line(
    trial_settings, renamed, tmp_path: Path
):
    path, written = renamed
    entry = {"conll": path, "tag_map": OTHER_DOMAIN_MAP, "unseen": "as_o"}
    settings = trial_settings | {"data": with_extra(trial_settings["data"], entry)}
    config, metrics = tmp_path / "trial.yaml", tmp_path / "metrics.jsonl"
    config.write_text(yaml.safe_dump(settings | {"max_steps": 6}))
    done = subprocess.run(
        [sys.executable, "-m", "trainables", "--config", str(config),
         "--metrics-out", str(metrics)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    final = json.loads(metrics.read_text().splitlines()[-1])
    found = Counter(tag[2:] for s in written for _, tag in s if tag.startswith("B-"))
    assert final["other_entities"] == found.total()
    assert final["other_entities_mapped"] == found["person"] + found["place"]
    assert final["other_entities_dropped"] == found["company"]
    assert "other_f1" in final and "test_entities" not in final
    assert "data.extra.other: " in done.stderr and "made O" in done.stderr  # said in the log
