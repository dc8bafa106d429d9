"""YAML's surprises, read away: `1e-5` is a number and `off`/`on`/`yes`/`no` are words where a
setting takes words, in study files, trial configs and `--set` values alike, through the one
loader of trainables/yaml_reading.py and the real command lines."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from study.spec import load_study
from tests.study_helpers import in_process, run_in_process, study_command, write_study
from trainables.errors import ConfigError
from trainables.settings.config import TrialConfig
from trainables.yaml_reading import Loader, bool_word, load_yaml, parse_value


@pytest.mark.parametrize(
    ("text", "value"),
    [("1e-5", 1e-5), ("3e-4", 3e-4), ("-2E3", -2000.0), ("1.0e5", 1e5), (".5", 0.5),
     ("1.5", 1.5), ("5", 5), ("off", "off"), ("on", "on"), ("yes", "yes"), ("no", "no"),
     ("true", True), ("False", False), ("null", None), ("[full, full-1]", ["full", "full-1"])],
)  # fmt: skip
def test_values_read_as_yaml_1_2(text, value):
    assert parse_value(text) == value
    assert type(parse_value(text)) is type(value)


def test_pyyaml_itself_is_left_alone():
    """Only this project's reading changes: PyYAML's own safe loader still reads YAML 1.1."""
    assert yaml.safe_load("a: 1e-5\nb: off") == {"a": "1e-5", "b": False}
    assert load_yaml("a: 1e-5\nb: off") == {"a": 1e-5, "b": "off"}


def test_a_boolean_setting_takes_the_yaml_1_1_words():
    assert [bool_word(w) for w in ("yes", "No", "ON", "off", True, "maybe", 1)] == [
        True, False, True, False, True, None, None,
    ]  # fmt: skip
    config = TrialConfig.from_dict({"probe": "yes", "label_all_subwords": "off"})
    assert config.probe is True and config.label_all_subwords is False
    with pytest.raises(ConfigError, match="probe='maybe' is not allowed: expected true or false"):
        TrialConfig.from_dict({"probe": "maybe"})


def test_a_study_file_takes_1e_5_and_off(tmp_path, tiny_model, tiny_corpus):
    path = write_study(tmp_path, str(tiny_model), tiny_corpus)
    text = path.read_text().replace("- 1.0e-06", "- 1e-6").replace("- 0.003", "- 3e-3")
    text = text.replace("  epochs: 4", "  epochs: 4\n  dynamics: off\n  probe: no")
    path.write_text(text)
    spec = load_study(str(path))
    assert spec.search["lr"].choices == (1e-6, 3e-3)
    assert spec.fixed["dynamics"] == "off" and spec.fixed["probe"] is False


def test_the_study_command_reads_1e_5_and_off(tmp_path, tiny_model, tiny_corpus):
    """Through the study command's own argument parsing (its `main`, in this process):
    `low: 1e-5` in the file, `dynamics=off` and `lr.high=3e-4` given with --set."""
    search = {"lr": {"type": "loguniform", "low": "LOW", "high": 1.0e-2}}
    path = write_study(tmp_path, str(tiny_model), tiny_corpus, search=search)
    path.write_text(path.read_text().replace("low: LOW", "low: 1e-5"))
    extra = ["--dry-run", "--set", "fixed.dynamics=off", "--set", "search.lr.high=3e-4"]
    code, out, err = run_in_process(study_command(path, tmp_path, *extra))
    assert code == 0, err
    assert "lr ~ loguniform[1e-05, 0.0003]" in out


def test_the_trial_command_reads_off_and_3e_4(trial_settings, tmp_path):
    """`python -m trainables --set dynamics=off` (the documented value) and a number in
    exponent form, in the file and on the command line (the command's `main`, in this
    process: two steps of the tiny model)."""
    from trainables.__main__ import main

    config = tmp_path / "trial.yaml"
    config.write_text(yaml.safe_dump(trial_settings).replace("lr: 0.001", "lr: 1e-3"))
    argv = ["--config", str(config), "--set", "dynamics=off", "--set", "head_lr=3e-4",
            "--set", "max_steps=2", "--set", "probe=no"]  # fmt: skip
    done = in_process(main, argv)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "steps 2" in done.stdout


def test_the_heads_shorthand_takes_no_as_false(tmp_path, tiny_model, tiny_corpus):
    grid = {"reinit_heads": {"one_head_in_blocks": [0], "baseline": "BASELINE"}}
    path = write_study(tmp_path, str(tiny_model), tiny_corpus, grid=grid)
    path.write_text(path.read_text().replace("baseline: BASELINE", "baseline: no"))
    heads = load_study(str(path)).grid["reinit_heads"]
    assert heads == ([[0, 0]], [[0, 1]], [[0, 2]], [[0, 3]])  # no re-init-nothing arm


def test_strip_lang_prefix_takes_the_words_too():
    from trainables.data.sources import split_source

    assert (
        split_source({"conll": "a.txt", "strip_lang_prefix": "no"}, "dev").strip_lang_prefix
        is False
    )
    assert split_source({"conll": "a.txt", "strip_lang_prefix": "yes"}, "dev").strip_lang_prefix
    with pytest.raises(ConfigError, match="data.dev.strip_lang_prefix: 'maybe' is not allowed"):
        split_source({"conll": "a.txt", "strip_lang_prefix": "maybe"}, "dev")


class _PurePythonLoader(yaml.SafeLoader):
    """PyYAML's own parser with the project's resolvers: what `load_yaml` read before it
    parsed with libyaml, kept here as the reference the C-parsed reading must equal."""


_PurePythonLoader.yaml_implicit_resolvers = Loader.yaml_implicit_resolvers


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, width=32), st.text(max_size=12),
    st.sampled_from(["1e-5", "off", "yes", "~", "0x1F", "1_000", ".inf", "2026-01-01", "a: b"]),
)  # fmt: skip
_documents = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=25,
)


@given(_documents, st.sampled_from([False, True]))
@settings(max_examples=300, deadline=None, derandomize=True)
def test_libyaml_reads_every_document_as_pyyaml_does(data, flow):
    """The loader parses with libyaml for speed; a document, written block or flow style,
    means what PyYAML's own parser reads it as, with the same YAML 1.2 numbers and words."""
    text = yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True)
    # the texts dumped as strings (quoted) and unquoted words alike read the same both ways
    assert load_yaml(text) == yaml.load(text, Loader=_PurePythonLoader)  # noqa: S506
