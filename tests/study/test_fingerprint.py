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
