"""Each study-file key is described once, beside the table its check reads, and
docs/study-keys.md is the page written from those tables: every key has a one-line
description, every key the shipped studies use is on it (or is a trial setting of
docs/trial-settings.md), and the page is current."""

from __future__ import annotations

import pytest

from study.spec import distributions
from study.spec.reference import DOC, key_tables, main, reference_markdown
from tests.study_helpers import REPO
from trainables.data.sources._kinds import CORPUS_KINDS, SPLIT_KINDS
from trainables.settings import TrialConfig
from trainables.yaml_reading import load_yaml

ROWS = [
    (prefix + key, text) for prefix, table in key_tables().items() for key, text in table.items()
]
# maps whose keys the user names (profiles, extra sets); their values hold documented keys
USER_NAMED = ("profiles", "extra")


@pytest.mark.parametrize(("key", "text"), ROWS, ids=[key for key, _ in ROWS])
def test_every_key_has_a_one_line_description(key, text):
    assert isinstance(text, str) and len(text.split()) >= 3 and "\n" not in text, (
        f"{key} has no description line: give it one beside its key table"
    )


def test_the_tables_that_others_extend_describe_every_key():
    for kind in distributions.KINDS.values():
        assert set(kind.keys) <= set(distributions.KEYS), kind.kind
    for key, kind in (*SPLIT_KINDS.items(), *CORPUS_KINDS.items()):
        assert next(iter(kind.entry_keys)) == key, f"{kind.__name__}.entry_keys starts with {key}"


def test_the_page_is_current():
    assert DOC.read_text(encoding="utf-8") == reference_markdown(), (
        "docs/study-keys.md is not current: run python -m study.spec.reference"
    )


def test_check_fails_on_a_stale_page(tmp_path, monkeypatch):
    stale = tmp_path / "study-keys.md"
    stale.write_text(reference_markdown().replace("`seeds`", "`seed_count`"), encoding="utf-8")
    monkeypatch.setattr("study.spec.reference.DOC", stale)
    assert main(["--check"]) == 1
    assert main([]) == 0 and main(["--check"]) == 0


def _keys_used(value, parent: str = "") -> set[str]:
    """Every mapping key in a study file's value, except the names a user gives."""
    found = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if parent not in USER_NAMED:
                found.add(str(key))
            found |= _keys_used(item, str(key))
    elif isinstance(value, list):
        for item in value:
            found |= _keys_used(item, parent)
    return found


@pytest.mark.parametrize("study", sorted((REPO / "search_spaces").glob("*.yaml")), ids=str)
def test_every_key_a_shipped_study_uses_is_documented(study):
    documented = {key.rsplit(".", 1)[-1] for key, _ in ROWS} | set(TrialConfig.field_names())
    used = _keys_used(load_yaml(study.read_text(encoding="utf-8")))
    undocumented = sorted(used - documented)
    assert not undocumented, f"{study.name} uses keys documented nowhere: {undocumented}"


def test_the_keys_once_documented_nowhere_are_on_a_generated_page():
    keys = (REPO / "docs" / "study-keys.md").read_text(encoding="utf-8")
    settings = (REPO / "docs" / "trial-settings.md").read_text(encoding="utf-8")
    for key in ("`data.<split>.hf`", "`data.<split>.config`", "`metric.mode`", "`trainable`"):
        assert f"| {key} |" in keys, key
    for name in ("dropout", "warmup_ratio", "weight_decay", "schedule", "max_grad_norm",
                 "reinit_std", "threads", "eval_batch_tokens"):  # fmt: skip
        assert f"| `{name}` |" in settings, name
