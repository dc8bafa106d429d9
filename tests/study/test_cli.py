"""The command lines explain themselves and refuse a wrong one in one line: `--help` with
examples, exit codes and the studies found, `study.run --list`, `--set` repeatable on every
command, the order a study name is looked up in, and docs/cli.md equal to the `--help` text."""

from __future__ import annotations

import subprocess
import sys

import pytest

import study.report.__main__ as report_cli
import trainables.__main__ as trial_cli
from study import run as run_cli
from study.cli_docs import DOC, cli_markdown
from study.spec import SEARCH_SPACES, known_studies
from study.spec.reading import find_study
from tests.study_helpers import REPO


def _exit_of(main, argv: list[str], capsys) -> tuple[int, str, str]:
    """The exit code and output of a command's `main`, an argparse exit included."""
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_docs_match_the_help():
    assert DOC.read_text(encoding="utf-8") == cli_markdown(), (
        "docs/cli.md is not current: run python -m study.cli_docs"
    )


def test_run_help_lists_examples_exit_codes_and_every_study_with_its_profiles(capsys):
    code, out, _ = _exit_of(run_cli.main, ["--help"], capsys)
    assert code == 0
    assert "examples:" in out and "--dry-run" in out
    for exit_code in (run_cli.EXIT_OK, run_cli.EXIT_BAD_INPUT, run_cli.EXIT_STORAGE,
                      run_cli.EXIT_INTERRUPTED):  # fmt: skip
        assert f"\n  {exit_code:<4} " in out
    table = out.split("studies found")[1]
    for name in known_studies(SEARCH_SPACES):
        assert f"\n  {name} " in table
    assert "smoke" in table  # a profile


@pytest.mark.parametrize("main", [report_cli.main, trial_cli.main], ids=["report", "trainables"])
def test_other_commands_help_has_examples_and_exit_codes(main, capsys):
    code, out, _ = _exit_of(main, ["--help"], capsys)
    assert code == 0
    assert "examples:" in out and "exit codes:\n  0 " in out and "\n  2 " in out


def test_list_prints_each_study_with_its_description_and_profiles(capsys):
    code, out, _ = _exit_of(run_cli.main, ["--list"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert all(name in lines for name in known_studies())
    depth = out.split("ner_depth\n", 1)[1].split("\n")
    assert depth[0].strip() == "full encoder vs the encoder without its last block, over lr, "\
        "data size and seeds"  # fmt: skip
    assert depth[1].strip().startswith("profiles: ") and "smoke" in depth[1]


def test_list_shows_a_broken_study_file_and_still_lists_the_others(tmp_path, monkeypatch, capsys):
    (tmp_path / "search_spaces").mkdir()
    (tmp_path / "search_spaces" / "broken.yaml").write_text("grid: [\n")
    monkeypatch.chdir(tmp_path)
    code, out, _ = _exit_of(run_cli.main, ["--list"], capsys)
    assert code == 0
    assert "broken\n  cannot be read: " in out and "ner_depth\n" in out


WRONG_RUN_LINES = {
    "no study": ([], "name a study"),
    "--list with a study": (["--list", "ner_depth"], "--list takes no study name"),
    "--resume with --dry-run": (["ner_depth", "--resume", "--dry-run"], "drop --resume"),
    "--num-cpus with --address": (
        ["ner_depth", "--address", "auto", "--num-cpus", "2"],
        "--num-cpus sizes a local Ray",
    ),  # fmt: skip
    "--max-concurrent 0": (["ner_depth", "--max-concurrent", "0"], "--max-concurrent 0: expected"),
    "--num-cpus 0": (["ner_depth", "--num-cpus", "0"], "--num-cpus 0: expected >= 1"),
    "unknown flag": (["ner_depth", "--dryrun"], "unrecognized arguments: --dryrun"),
    "count not a number": (["ner_depth", "--num-cpus", "two"], "invalid int value: 'two'"),
}


@pytest.mark.parametrize("case", list(WRONG_RUN_LINES))
def test_a_wrong_run_command_line_is_one_line_and_exit_2(case, tmp_path, monkeypatch, capsys):
    argv, expected = WRONG_RUN_LINES[case]
    monkeypatch.chdir(tmp_path)
    code, out, err = _exit_of(run_cli.main, argv, capsys)
    assert code == 2
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ") and expected in err, err
    assert list(tmp_path.iterdir()) == []


WRONG_TRIAL_LINES = {
    "--resume without --checkpoint-dir": (["--resume"], "give its --checkpoint-dir"),
    "unknown flag": (["--sett", "lr=1"], "unrecognized arguments: --sett"),
    "--set without a value": (["--set"], "expected one argument"),
    "--resume with an empty --checkpoint-dir": (
        ["--resume", "--checkpoint-dir", "."],
        "--resume: . holds no saved state",
    ),
}


@pytest.mark.parametrize("case", list(WRONG_TRIAL_LINES))
def test_a_wrong_trial_command_line_is_one_line_and_exit_2(case, tmp_path, monkeypatch, capsys):
    argv, expected = WRONG_TRIAL_LINES[case]
    monkeypatch.chdir(tmp_path)
    code, out, err = _exit_of(trial_cli.main, argv, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and expected in err


@pytest.mark.slow  # over ~7 s: the slow tier
def test_trainables_resume_without_checkpoint_dir_has_no_traceback():
    """The issue's case, as a user runs it: a TypeError traceback before."""
    done = subprocess.run(
        [sys.executable, "-m", "trainables", "--resume"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --resume continues from a saved state: give its --checkpoint-dir "
        "(see python -m trainables --help)"
    ]


def test_set_is_repeatable_and_keeps_every_pair_in_order_on_every_command():
    sets = ["--set", "a=1", "--set", "b.c=2", "--set", "a=3"]
    assert run_cli.parse_args(["s", *sets]).overrides == ["a=1", "b.c=2", "a=3"]
    assert trial_cli.parse_args(sets).overrides == ["a=1", "b.c=2", "a=3"]
    assert trial_cli._parse_overrides(trial_cli.parse_args(sets).overrides) == {"a": 3, "b.c": 2}


def test_a_study_name_is_a_path_then_the_working_folders_then_the_shipped(tmp_path, monkeypatch):
    own = tmp_path / "search_spaces"
    own.mkdir()
    (own / "smoke.yaml").write_text("description: mine\n")
    elsewhere = tmp_path / "elsewhere" / "ner_depth.yaml"
    elsewhere.parent.mkdir()
    elsewhere.write_text("description: a path\n")
    monkeypatch.chdir(tmp_path)
    assert find_study("smoke").resolve() == (own / "smoke.yaml").resolve()
    assert find_study("ner_depth").resolve() == (SEARCH_SPACES / "ner_depth.yaml").resolve()
    assert find_study("elsewhere/ner_depth.yaml").resolve() == elsewhere.resolve()
    assert "smoke" in known_studies() and "ner_depth" in known_studies()
