"""Each trial setting is described once, on its `TrialConfig` field: every field has a help line
and a YAML type, the lists the checks read are derived from those fields, the model is built
from the fields `Architecture` names, and docs/trial-settings.md is the page written from them."""

from __future__ import annotations

import dataclasses

import pytest

from trainables.settings import config
from trainables.settings.config import Architecture, TrialConfig
from trainables.settings.reference import DOC, main, reference_markdown


@pytest.mark.parametrize("item", dataclasses.fields(TrialConfig), ids=lambda f: f.name)
def test_every_setting_has_a_help_line_and_a_yaml_type(item):
    assert item.metadata.get(config.HELP), f"{item.name} has no help line: give it one (setting)"
    assert item.metadata.get(config.YAML), f"{item.name} has no YAML type: give it one (setting)"


def test_the_page_is_current():
    assert DOC.read_text(encoding="utf-8") == reference_markdown(), (
        "docs/trial-settings.md is not current: run python -m trainables.settings.reference"
    )


def test_check_fails_on_a_stale_page(tmp_path, monkeypatch):
    stale = tmp_path / "trial-settings.md"
    stale.write_text(reference_markdown().replace("`lr`", "`learning_rate`"), encoding="utf-8")
    monkeypatch.setattr("trainables.settings.reference.DOC", stale)
    assert main(["--check"]) == 1
    assert main([]) == 0 and main(["--check"]) == 0


def test_the_page_names_every_setting_and_its_traits():
    page = reference_markdown()
    rows = {line.split(" | ")[0].strip("| `"): line for line in page.splitlines()[2:]}
    for name in TrialConfig.field_names():
        assert f"| `{name}` |" in page, name
    assert "layer" in rows["reinit_from"] and "model" in rows["reinit_from"]
    assert "fixed (a study never mixes precisions" in rows["precision"]
    assert "no stage (applies to the target stage only" in rows["probe"]


def test_the_architecture_is_the_settings_of_the_same_name():
    settings = TrialConfig(depth=3, reinit_from=2, reinit_heads=[[1, 0]], freeze=1, dropout=0.2)
    arch = settings.architecture()
    fields = {f.name for f in dataclasses.fields(Architecture)}
    assert fields <= set(TrialConfig.field_names())
    assert arch.reinit_heads == ((1, 0),) and arch.freeze == 1 and arch.dropout == 0.2
    assert dataclasses.replace(arch, reinit_heads=[[1, 0]]) == Architecture(
        **{name: getattr(settings, name) for name in fields}
    )


def test_the_traits_are_read_from_the_fields():
    """The lists the spec, the stages and the synthetic surface use are the fields' traits;
    the draws are pinned: changing them changes every synthetic study's numbers."""
    layer = tuple(f.name for f in dataclasses.fields(TrialConfig) if f.metadata[config.LAYER])
    assert config.LAYER_FIELDS == layer == ("reinit_from", "reinit_heads", "freeze")
    assert set(config.FIXED_ONLY) == {"precision", "fingerprint", "fingerprint_max_bytes"}
    assert {"probe", "freeze", "depth", "intermediate", "seed"} <= set(config.NOT_IN_A_STAGE)
    assert set(config.SURFACE_DRAWS) == {
        "depth", "reinit_from", "reinit_heads", "data_fraction", "lr", "epochs",
    }  # fmt: skip
