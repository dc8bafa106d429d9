"""Data fingerprints come from what each kind of source says it reads."""

from __future__ import annotations

from study.fingerprint import data_fingerprint


def test_the_embedded_corpus_keeps_the_fingerprint_of_the_published_reports():
    # reports/ner_depth/README.md records this string for the embedded WNUT-16
    assert data_fingerprint({"embedded": "wnut16"}) == "embedded:wnut16:sha256:861b6f8126f60d50"


def test_files_are_hashed_by_content_and_dataset_names_recorded_as_given(tmp_path):
    files = {}
    for split in ("train", "dev", "test"):
        files[split] = tmp_path / f"{split}.txt"
        files[split].write_text(f"word\tO\n\n{split}\tB-PER\n")
    data = {"train": str(files["train"]), "dev": {"conll": str(files["dev"])},
            "test": {"hf": "some/dataset", "split": "test"}}  # fmt: skip
    first = data_fingerprint(data)
    assert first.startswith("sha256:") and first.endswith(";hf:some/dataset")
    files["dev"].write_text("changed\tO\n")
    assert data_fingerprint(data) != first


def test_extra_sets_of_an_embedded_study_are_part_of_its_fingerprint(tmp_path):
    extra = tmp_path / "other.txt"
    extra.write_text("word\tO\n")
    plain = data_fingerprint({"embedded": "wnut16"})
    with_extra = data_fingerprint({"embedded": "wnut16", "extra": {"other": str(extra)}})
    assert with_extra.startswith(plain + ";sha256:")


def test_code_version_is_dirty_for_code_changes_but_not_for_regenerated_reports(
    tmp_path, monkeypatch
):
    import subprocess

    from study import fingerprint

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "README.md").write_text("old report\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "pyproject.toml").write_text("[project]\n")  # a checkout's root
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    monkeypatch.setattr(fingerprint, "REPO", tmp_path)
    clean = fingerprint.code_version()
    assert len(clean) == 12 and not clean.endswith("+dirty")
    (tmp_path / "reports" / "README.md").write_text("new report\n")
    assert fingerprint.code_version() == clean
    (tmp_path / "code.py").write_text("x = 2\n")
    assert fingerprint.code_version() == clean + "+dirty"
    # an installed package (no pyproject.toml beside it) in a venv inside some git repository:
    # the commit setuptools-scm put in its version, never that repository's
    monkeypatch.setattr(fingerprint, "REPO", tmp_path / "reports")
    versions = {
        "0.1.1.dev610+g36d75645a": "36d75645a",
        "0.1.1.dev610+g36d75645a.d20261128": "36d75645a+dirty",
        "0.1.0": "ner-depth-study 0.1.0",  # built without git history
    }
    for version, expected in versions.items():
        monkeypatch.setattr(fingerprint.metadata, "version", lambda _name, v=version: v)
        assert fingerprint.code_version() == expected


def test_library_versions_are_the_installed_ones():
    from importlib import metadata

    from study.fingerprint import LIBRARIES, library_versions

    versions = library_versions()
    assert list(versions) == list(LIBRARIES)
    assert all(versions[name] == metadata.version(name) for name in LIBRARIES)
    assert library_versions(("no-such-library-here",)) == {"no-such-library-here": "absent"}
