"""`--set KEY=VALUE` of `python -m study.run`, through its dry run in-process, and the trial
settings of `python -m trainables --config FILE --set KEY=VALUE` through the function its main
reads them with: every value a plan or one `error:` line, never a traceback."""

from __future__ import annotations

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from study.run import main
from study.spec import SEARCH_SPACES
from tests.study.fuzz.harness import (
    case_folder,
    check_outcome,
    fuzz_settings,
    run_entry,
    user_error_outcome,
)
from tests.study.fuzz.strategies import WORDS, paths, values
from trainables.__main__ import BAD_INPUT, read_settings
from trainables.settings.config import TrialConfig
from trainables.yaml_reading import load_yaml

SMOKE = load_yaml((SEARCH_SPACES / "smoke.yaml").read_text())
KEYS = sorted({".".join(str(part) for part in path) for path in paths(SMOKE)})


def value_text(value: object) -> str:
    return (
        yaml.safe_dump(value, default_flow_style=True, width=10_000)
        .strip()
        .removesuffix("...")
        .strip()
    )


set_values = st.one_of(values.map(value_text), st.text(max_size=20), st.sampled_from(WORDS))
set_keys = st.one_of(
    st.sampled_from(KEYS),
    st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=6)), min_size=1, max_size=4).map(
        ".".join
    ),
)
options = st.lists(st.tuples(set_keys, set_values).map("=".join) | st.text(max_size=12), max_size=3)


@fuzz_settings(0.15)
@given(options)
@example(["fixed.epochs=abc"])
@example(["-:"])
@example(["profiles.smoke.seeds=1"])
@example(["grid.depth.0.x=1"])
@example(["seeds=[" * 40 + "]" * 40])  # nesting beyond the reader's limit
def test_study_set_options(sets):
    argv = ["smoke", "--profile", "smoke", "--dry-run"]
    argv += [f"--set={text}" for text in sets]  # a value may start with '-'
    with case_folder() as folder:
        outcome = run_entry(lambda: main(argv), folder)
    check_outcome(outcome)


trial_keys = st.one_of(st.sampled_from(TrialConfig.field_names()), st.sampled_from(WORDS))
trial_files = st.one_of(
    st.dictionaries(trial_keys, values, max_size=5).map(yaml.safe_dump),
    values.map(yaml.safe_dump),
    st.text(max_size=40),
    st.binary(max_size=40),
)


def run_trial_reader(text: str | bytes | None, pairs: list[str]) -> None:
    with case_folder() as folder:
        config = None
        if text is not None:
            config = folder / "trial.yaml"
            config.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))

        def entry() -> int:
            return user_error_outcome(
                lambda: read_settings(config and str(config), pairs), BAD_INPUT
            )

        check_outcome(run_entry(entry, folder))


@fuzz_settings(0.15)
@given(
    st.none() | trial_files, st.lists(st.tuples(trial_keys, set_values).map("=".join), max_size=3)
)
@example("- a list\n", [])  # not a mapping: one line, not AttributeError
@example("1: 2\n", [])  # a key that is not a setting's name
@example(None, ["lr=" + "[" * 40 + "]" * 40])
@example(None, ["reinit_heads=null"])  # found by a FUZZ_RANDOM run: TypeError from config.py
def test_trial_settings(text, pairs):
    run_trial_reader(text, pairs)
