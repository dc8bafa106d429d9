"""Study files a new user might write, through `python -m study.run FILE --profile P --dry-run`
(run by the command server, tests/study/fuzz/harness.py): every shipped study and profile
mutated (keys dropped, renamed, retyped and duplicated, scalars swapped for lists and mappings,
long strings, deep nesting), and generated documents. Each ends with a plan (exit 0) or with
exactly one line on stderr naming the file, its line and the key, and nothing written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from study.spec import SEARCH_SPACES
from study.spec.keys import TOP_LEVEL_KEYS
from tests.study.fuzz.harness import CommandServer, check_outcome, fuzz_settings
from tests.study.fuzz.strategies import OPS, deep, keys, long_strings, mutate, paths, values
from trainables.yaml_reading import load_yaml

SHIPPED = sorted(SEARCH_SPACES.glob("*.yaml"))
STUDIES = {path.stem: load_yaml(path.read_text()) for path in SHIPPED}
SHIPPED_PATHS = {name: paths(study) for name, study in STUDIES.items()}
FILE = "study.yaml"
# `error: study.yaml:LINE[:COLUMN]: ...`, or an override's `--set K=V: ...`
NAMES_FILE_AND_LINE = re.compile(rf"^error: {re.escape(FILE)}:\d+(:\d+)?: \S")


def dry_run(server: CommandServer, text: str | bytes, profile: str, *extra: str) -> None:
    """Write the study, run the dry run, check the property."""
    with server.case_folder({FILE: text if isinstance(text, bytes) else text.encode()}) as folder:
        argv = [str(folder / FILE), "--profile", profile, "--dry-run", *extra]
        outcome = server.run("study.run", argv, folder)
    check_outcome(outcome, None if extra else NAMES_FILE_AND_LINE)


def dumped(data: object) -> str:
    """`data` as a block-style YAML file (libyaml's emitter where PyYAML has it: fast)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, width=1000)


@pytest.mark.parametrize("name", [path.stem for path in SHIPPED])
def test_every_shipped_study_and_profile_plans(study_command, name):
    """The starting points are valid: each shipped profile plans with exit 0, printing the
    plan and nothing on stderr, in a process of its own (forked) and in the server."""
    for profile in ("default", *(STUDIES[name].get("profiles") or {})):
        for fork in (True, False):
            outcome = study_command.command(
                "study.run", {}, [name, "--profile", profile, "--dry-run"], fork=fork
            )
            assert outcome.code == 0, outcome.err
            assert outcome.err == b"" and outcome.out and not outcome.written, outcome


@st.composite
def mutated_study(draw) -> tuple[str, str]:
    """A shipped study with one to three mutations, dumped, and a profile to run it with."""
    name = draw(st.sampled_from(sorted(STUDIES)))
    data = STUDIES[name]
    for turn in range(draw(st.integers(1, 2))):
        where = SHIPPED_PATHS[name] if turn == 0 else paths(data)
        if not where:
            break
        path = draw(st.sampled_from(where))
        op = draw(st.sampled_from(OPS))
        value = draw(values) if op == "retype" else None  # deep values: generated documents
        data = mutate(data, path, op, value, draw(keys) if op == "rename" else None)
    found = data.get("profiles") if isinstance(data, dict) else None
    profiles = list(found) if isinstance(found, dict) else []
    profile = draw(st.sampled_from([*profiles, "default", "smoke", "nope"]))
    return dumped(data), str(profile)  # the command line gives text


@fuzz_settings(0.2)
@given(mutated_study())
@example(  # issue 30: `heads:` as a mapping in the one-head-at-a-time shorthand
    (
        dumped({**STUDIES["ner_heads"], "model": "bert-base-cased", "grid": {"reinit_heads": {
            "one_head_in_blocks": [0], "heads": {"a": 1}}}}),
        "default",
    )
)  # fmt: skip
@example((dumped({**STUDIES["smoke"], "model": "m" * 500}), "default"))  # issue 30: OSError
def test_mutated_shipped_studies(study_command, case):
    text, profile = case
    dry_run(study_command, text, profile)


def _duplicate_line(text: str, index: int) -> str:
    lines = text.splitlines()
    keyed = [i for i, line in enumerate(lines) if re.match(r"^\s*[\w-]+:", line)]
    at = keyed[index % len(keyed)]
    return "\n".join([*lines[: at + 1], lines[at], *lines[at + 1 :]]) + "\n"


def _cut(text: str, index: int) -> str:
    return text[: index % (len(text) + 1)]


def _insert(text: str, index: int, piece: str) -> str:
    at = index % (len(text) + 1)
    return text[:at] + piece + text[at:]


@fuzz_settings(0.15)
@given(
    st.sampled_from(SHIPPED),
    st.sampled_from(["duplicate", "cut", "insert"]),
    st.integers(0, 10_000),
    st.sampled_from(["\t", ":", "- ", "{", "]", "&a ", "*a", "!!python/object:os.system ",
                     "\n  ", "'", '"', "%YAML 1.1\n", "---\n", "\x00", "\ufeff", "? "]),
    st.sampled_from(["default", "smoke"]),
)  # fmt: skip
def test_edited_study_text(study_command, shipped, edit, index, piece, profile):
    """Edits of the text itself: a key written twice, a file cut short, a stray character."""
    text = shipped.read_text()
    if edit == "duplicate":
        text = _duplicate_line(text, index)
    elif edit == "cut":
        text = _cut(text, index)
    else:
        text = _insert(text, index, piece)
    dry_run(study_command, text, profile)


documents = st.dictionaries(
    st.one_of(st.sampled_from(TOP_LEVEL_KEYS), keys), values, max_size=len(TOP_LEVEL_KEYS)
)


@fuzz_settings(0.1)
@given(st.one_of(documents, values, deep), st.sampled_from(["default", "smoke"]))
def test_generated_documents(study_command, data, profile):
    dry_run(study_command, dumped(data), profile)


@fuzz_settings(0.02)
@given(st.sampled_from(sorted(STUDIES)), st.sampled_from(["description", "model", "metric"]),
       long_strings)  # fmt: skip
def test_long_strings(study_command, name, key, text):
    dry_run(study_command, dumped({**STUDIES[name], key: text}), "default")


@fuzz_settings(0.03)
@given(st.binary(min_size=1, max_size=64), st.sampled_from(SHIPPED))
def test_bytes_that_are_not_utf8(study_command, noise, shipped):
    dry_run(study_command, shipped.read_bytes() + noise, "default")


@pytest.mark.parametrize("fork", [True, False])
def test_a_missing_study_file_is_one_line(study_command, fork):
    outcome = study_command.command(
        "study.run", {}, [str(Path("nowhere") / FILE), "--dry-run"], fork=fork
    )
    assert outcome.code == 2
    assert "nowhere/study.yaml" in check_outcome(outcome)
