"""Each trial setting is described once, on its `TrialConfig` field: every field has a help line
and a YAML type, the lists the checks read are derived from those fields (each checked here by
what it does: the model's build, a stage's keys, the surface's draws, the page), and
docs/trial-settings.md is the page written from them."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from tests.study_helpers import REPO
from trainables.settings import config
from trainables.settings.budget import BUDGET
from trainables.settings.config import Architecture, TrialConfig
from trainables.settings.reference import DOC, main, reference_markdown
from trainables.settings.stage_config import StageError, stage_settings
from trainables.training.synthetic import trial_hash


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


def _attributes_read(function: str, source: Path, name: str) -> set[str]:
    """The attributes of `name` that `function` in `source` reads, found in its syntax tree."""
    tree = ast.parse(source.read_text())
    [node] = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name
    }


def test_the_model_is_built_from_the_settings_marked_model():
    """`build_tagger` reads every field of the architecture and no other setting: a field
    marked `model` that the build never applies, or a setting it applies that lacks the mark,
    fails here (read from the build's own code, not from the marks)."""
    tagger = REPO / "trainables" / "model" / "tagger.py"
    assert _attributes_read("build_tagger", tagger, "arch") == set(config.MODEL_FIELDS)
    assert {f.name for f in dataclasses.fields(Architecture)} == set(config.MODEL_FIELDS)
    settings = TrialConfig(depth=3, reinit_from=2, reinit_heads=[[1, 0]], freeze=1, dropout=0.2)
    arch = settings.architecture()
    assert (arch.depth, arch.reinit_from, arch.freeze, arch.dropout) == (3, 2, 1, 0.2)
    assert arch.reinit_heads == ((1, 0),) and hash(arch) == hash(settings.architecture())
    with pytest.raises(dataclasses.FrozenInstanceError):
        arch.depth = 2


def _stage_value(name: str) -> object:
    """A value a stage may give setting `name`, from its YAML type and bound."""
    if name == BUDGET:
        return {"steps": 7}
    least = float(config.BOUNDS[name].split()[1])
    return int(least) + 2 if config.YAML_TYPES[name] == config.INTEGER else least + 0.5


def _stages(stages: list) -> list:
    return TrialConfig(intermediate=stages).stages()


def test_a_stage_sets_the_settings_marked_in_a_stage_and_refuses_the_rest():
    """Every trial setting written in a stage: one marked `in_a_stage` is taken (its type and
    bound checked as the trial checks them), one marked `not_in_a_stage` refused with its
    reason, any other refused as shared by every stage."""
    data = {"embedded": "wnut16"}
    for name in TrialConfig.field_names():
        if name == "data":  # a stage's own corpus: its required key
            continue
        stage = {"name": "s", "data": data}
        if name in config.IN_A_STAGE:
            value = _stage_value(name)
            [checked] = _stages([{**stage, name: value}])
            assert checked.settings[name] == value and stage_settings(checked)[name] == value
            if name in config.BOUNDS:
                bad = {**stage, name: float(config.BOUNDS[name].split()[1]) - 1}
                with pytest.raises(StageError, match=config.BOUNDS[name]):
                    _stages([bad])
            continue
        with pytest.raises(StageError) as refused:
            _stages([{**stage, name: getattr(TrialConfig(), name)}])
        why = config.NOT_IN_A_STAGE.get(name, "every stage shares")
        assert "not allowed in a stage" in str(refused.value) and why in str(refused.value)
    # what a stage is for (docs/design.md), independently of the marks: its own optimisation
    # and length, never the layer surgery, the seeds or the data share
    assert {"lr", "head_lr", "epochs", "batch_size", "budget"} <= set(config.IN_A_STAGE)
    assert not {"depth", "reinit_from", "probe", "seed", "data_fraction"} & set(config.IN_A_STAGE)


def test_the_page_shows_each_trait_the_fields_carry():
    """Each trait the fields carry reaches the setting's row of the page; spot checks of what
    the settings are, independently of the marks."""
    rows = {line.split(" | ")[0].strip("| `"): line for line in reference_markdown().splitlines()}
    for name in config.TUNABLE:
        assert "tunable" in rows[name]
    for name, bound in config.BOUNDS.items():
        assert f" | {config.YAML_TYPES[name]} {bound} | " in rows[name]
    assert {"lr", "weight_decay", "warmup_ratio"} <= set(config.TUNABLE)
    assert not {"seed", "precision", "data", "epochs"} & set(config.TUNABLE)
    assert "each stage `false`" in rows["probe"] and "each stage `null`" in rows["reinit_from"]


def test_the_surface_draws_from_the_settings_marked_draws_alone():
    """A synthetic trial's own draws change with each setting marked `draws` and with no
    other (the seed moves the draws every arm shares, not these)."""
    settings = TrialConfig().to_dict()
    base = trial_hash(settings)
    for name in TrialConfig.field_names():
        changed = trial_hash({**settings, name: ["another value"]})
        assert (changed != base) == (name in config.SURFACE_DRAWS), name
    # the surface's formula reads the arm's structure and its lr (surface.py), not its seed
    assert {"depth", "reinit_from", "lr"} <= set(config.SURFACE_DRAWS)
    assert "seed" not in config.SURFACE_DRAWS
