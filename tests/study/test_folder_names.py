"""A study or profile name that would escape the folders it was given is refused before
anything runs, and a report replaces only a folder that a report wrote (issue: "Nothing
outside its folders"). Each case checks every file under the test's temporary root, not only
the case's own folder, byte for byte."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from study.folder_names import (
    MARKER,
    MARKER_TEXT,
    check_name,
    check_replaceable,
    inside,
    name_problem,
    report_folder,
)
from study.report.build import _replace
from tests.study_helpers import run_in_process, study_command, write_synthetic_study
from trainables.errors import UserInputError

SURFACE = {"peak_f1": 0.8}


def _snapshot(root: Path) -> dict[str, str]:
    """Every file and folder under `root`: a file's sha256, a folder's marker."""
    out = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        out[key] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _bystanders(tmp: Path) -> None:
    """Files a careless name would have deleted: another study's report, a file beside the
    reports folder and one beside the storage folder."""
    (tmp / "reports" / "otherstudy").mkdir(parents=True)
    (tmp / "reports" / "otherstudy" / "README.md").write_text("another study's report\n")
    (tmp / "victim").mkdir()
    (tmp / "victim" / "important.txt").write_text("keep me\n")
    (tmp / "ray_results").mkdir()
    (tmp / "ray_results" / "keep.txt").write_text("keep me too\n")


def _refused(tmp: Path, command: list[str], expected: str) -> None:
    before = _snapshot(tmp)
    code, out, err = run_in_process(command)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert expected in lines[0], lines[0]
    assert _snapshot(tmp) == before


@pytest.mark.parametrize("stem", [".", "..", " spaced", "-dash", "a" * 101])
def test_a_study_file_whose_name_cannot_be_a_folder_is_refused(tmp_path: Path, stem: str) -> None:
    _bystanders(tmp_path)
    studies = tmp_path / "studies"
    studies.mkdir()
    path = studies / f"{stem}.yaml"
    write_synthetic_study(studies, SURFACE).rename(path)
    _refused(tmp_path, study_command(path, tmp_path), "cannot name its folders")


@pytest.mark.parametrize("profile", ["/../../victim", "..", "a/b", ".hidden", "x" * 101])
def test_a_profile_whose_name_cannot_be_a_folder_is_refused(tmp_path: Path, profile: str) -> None:
    _bystanders(tmp_path)
    study = write_synthetic_study(tmp_path, SURFACE)
    data = yaml.safe_load(study.read_text())
    data["profiles"] = {profile: {}}
    study.write_text(yaml.safe_dump(data, sort_keys=False))
    command = study_command(study, tmp_path)
    command[command.index("--profile") + 1] = profile
    _refused(tmp_path, command, "profile name")


def test_a_reports_root_that_is_a_file_is_refused_before_the_study(tmp_path: Path) -> None:
    study = write_synthetic_study(tmp_path, SURFACE)
    (tmp_path / "reports").write_text("a file, not a folder\n")
    _refused(tmp_path, study_command(study, tmp_path), "is not a folder")


def test_a_report_folder_that_a_report_did_not_write_is_refused(tmp_path: Path) -> None:
    study = write_synthetic_study(tmp_path, SURFACE)
    mine = tmp_path / "reports" / "teststudy"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("the user's own notes\n")
    _refused(tmp_path, study_command(study, tmp_path), "is not a report")


def test_names_checked_as_names() -> None:
    for good in ("ner_depth", "smoke", "default", "cluster-2", "a.b", "X" * 100):
        assert name_problem(good) is None
        assert check_name("study name", good) == good
    for bad in ("", ".", "..", "/x", "a/b", "a\\b", ".x", "-x", "a b", "\x1b[31m", "x" * 101, 5):
        assert name_problem(bad) is not None
        with pytest.raises(UserInputError, match="profile name"):
            check_name("profile name", bad)


def test_inside_follows_links_out_of_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    assert inside(root, root / "a" / "b", "x") == (root / "a" / "b").resolve()
    with pytest.raises(UserInputError, match="outside"):
        inside(root, root / ".." / "victim", "the report folder")
    with pytest.raises(UserInputError, match="outside"):
        inside(root, root / "out" / "victim", "the report folder")
    with pytest.raises(UserInputError):
        report_folder(root, "..", None)
    assert report_folder(root, "s", "smoke") == root / "s-smoke"


def test_a_report_replaces_only_a_folder_with_its_marker(tmp_path: Path) -> None:
    staging = tmp_path / ".staging"
    staging.mkdir()
    (staging / "README.md").write_text("new report\n")
    (staging / MARKER).write_text(MARKER_TEXT)
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "README.md").write_text("the user's file\n")
    with pytest.raises(UserInputError, match="is not a report"):
        _replace(staging, folder)
    assert (folder / "README.md").read_text() == "the user's file\n"
    (folder / MARKER).write_text(MARKER_TEXT)
    _replace(staging, folder)
    assert (folder / "README.md").read_text() == "new report\n"
    assert not staging.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    check_replaceable(empty)  # an empty folder holds nothing to lose
    check_replaceable(tmp_path / "absent")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserInputError, match="not a folder"):
        check_replaceable(tmp_path / "file")


def test_every_committed_report_carries_the_marker() -> None:
    reports = Path(__file__).resolve().parents[2] / "reports"
    folders = [p for p in reports.iterdir() if p.is_dir() and (p / "README.md").is_file()]
    assert folders
    for folder in folders:
        assert (folder / MARKER).read_text() == MARKER_TEXT, folder
