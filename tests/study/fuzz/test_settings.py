"""`--set KEY=VALUE` of `python -m study.run`, through its dry run, and the trial settings of
`python -m trainables --config FILE --set KEY=VALUE`, through the command stopped where it
would build the trial once the settings are read (both run by the command server,
tests/study/fuzz/harness.py): every value a plan, or settings read, or exactly one `error:`
line on stderr and nothing written; never a traceback."""

from __future__ import annotations

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from study.spec import SEARCH_SPACES
from tests.study.fuzz.harness import CommandServer, check_outcome, fuzz_settings
from tests.study.fuzz.strategies import ARG_TEXT, WORDS, paths, values
from trainables.settings.config import TrialConfig
from trainables.yaml_reading import load_yaml

SMOKE = load_yaml((SEARCH_SPACES / "smoke.yaml").read_text())
KEYS = sorted({".".join(str(part) for part in path) for path in paths(SMOKE)})


def value_text(value: object) -> str:
    """`value` as one line of flow-style YAML (libyaml's emitter: fast), as a user types it."""
    text = yaml.dump(value, Dumper=yaml.CSafeDumper, default_flow_style=True, width=10_000)
    return text.strip().removesuffix("...").strip()


# a command-line argument holds no NUL character (the C strings of argv cannot)
set_values = st.one_of(
    values.map(value_text).filter(lambda t: "\x00" not in t),
    st.text(ARG_TEXT, max_size=20),
    st.sampled_from(WORDS),
)
set_keys = st.one_of(
    st.sampled_from(KEYS),
    st.lists(
        st.one_of(st.sampled_from(WORDS), st.text(ARG_TEXT, max_size=6)), min_size=1, max_size=4
    ).map(".".join),
)
options = st.lists(
    st.tuples(set_keys, set_values).map("=".join) | st.text(ARG_TEXT, max_size=12), max_size=3
)


@fuzz_settings(0.15)
@given(options)
@example(["fixed.epochs=abc"])
@example(["-:"])
@example(["profiles.smoke.seeds=1"])
@example(["grid.depth.0.x=1"])
@example(["seeds=[" * 40 + "]" * 40])  # nesting beyond the reader's limit
@example(["analysis=", "¹="])  # found by the default run: a superscript digit taken for an index
def test_study_set_options(study_command, sets):
    argv = ["smoke", "--profile", "smoke", "--dry-run"]
    argv += [f"--set={text}" for text in sets]  # a value may start with '-'
    check_outcome(study_command.command("study.run", {}, argv))


trial_keys = st.one_of(st.sampled_from(TrialConfig.field_names()), st.sampled_from(WORDS))


def safe_dump(value: object) -> str:
    return yaml.dump(value, Dumper=yaml.CSafeDumper)


trial_files = st.one_of(
    st.dictionaries(trial_keys, values, max_size=5).map(safe_dump),
    values.map(safe_dump),
    st.text(max_size=40),
    st.binary(max_size=40),
)


def run_trial_reader(server: CommandServer, text: str | bytes | None, pairs: list[str]) -> None:
    """`python -m trainables [--config trial.yaml] --set=PAIR...`, stopped where it would build
    the trial from the settings it read."""
    files, argv = {}, [f"--set={pair}" for pair in pairs]
    if text is not None:
        files["trial.yaml"] = text if isinstance(text, bytes) else text.encode("utf-8")
        argv = ["--config", "trial.yaml", *argv]
    check_outcome(server.command("trainables.__main__", files, argv, stop_at="trial"))


@fuzz_settings(0.15)
@given(
    st.none() | trial_files, st.lists(st.tuples(trial_keys, set_values).map("=".join), max_size=3)
)
@example("- a list\n", [])  # not a mapping: one line, not AttributeError
@example("1: 2\n", [])  # a key that is not a setting's name
@example(None, ["lr=" + "[" * 40 + "]" * 40])
@example(None, ["reinit_heads=null"])  # found by a FUZZ_RANDOM run: TypeError from config.py
def test_trial_settings(trial_command, text, pairs):
    run_trial_reader(trial_command, text, pairs)
