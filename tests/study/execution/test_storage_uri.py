"""Sub-paths of `--storage`: appended to the path of a local folder or URI, never to a query."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from study.execution.storage import StudyStore
from study.execution.storage_uri import join_storage

QUERY = "endpoint_override=127.0.0.1:9000&scheme=http&region=us-east-1"


@pytest.mark.parametrize(
    ("root", "joined"),
    [
        ("/data/runs", "/data/runs/study/default-1/explore"),
        ("/data/runs/", "/data/runs/study/default-1/explore"),
        ("/", "/study/default-1/explore"),
        ("runs", "runs/study/default-1/explore"),
        ("/data/what?not", "/data/what?not/study/default-1/explore"),  # a file name, no query
        ("file:///shared/runs", "file:///shared/runs/study/default-1/explore"),
        ("file:///", "file:///study/default-1/explore"),
        ("s3://bucket", "s3://bucket/study/default-1/explore"),
        ("s3://bucket/runs/", "s3://bucket/runs/study/default-1/explore"),
        (f"s3://bucket/runs?{QUERY}", f"s3://bucket/runs/study/default-1/explore?{QUERY}"),
        (f"s3://bucket?{QUERY}", f"s3://bucket/study/default-1/explore?{QUERY}"),
        (
            "gs://bucket/runs?anonymous=true",
            "gs://bucket/runs/study/default-1/explore?anonymous=true",
        ),
        ("memory://", "memory:///study/default-1/explore"),
    ],
)
def test_sub_paths_go_on_the_path_and_the_query_stays_last(root, joined):
    assert join_storage(root, "study/default-1", "explore") == joined
    assert join_storage(root, "/study/", "default-1/", "explore") == joined  # slashes once


def test_nothing_to_join_leaves_the_root_as_given():
    assert join_storage(f"s3://bucket/runs?{QUERY}") == f"s3://bucket/runs?{QUERY}"
    assert join_storage("/data/runs", "", "/") == "/data/runs"


@pytest.mark.parametrize(
    "root", ["file:///tmp/study-runs", f"s3://bucket/runs?{QUERY}", f"s3://bucket?{QUERY}"]
)
def test_pyarrow_reads_the_joined_uri_as_the_joined_path(root):
    """What Ray does with the URI the driver hands it: the same filesystem, and the sub-path
    inside it (the query read as options, not as a folder name)."""
    fs, base = pafs.FileSystem.from_uri(root)
    joined_fs, joined_path = pafs.FileSystem.from_uri(join_storage(root, "s/default-1", "x"))
    assert type(joined_fs) is type(fs)
    assert joined_path == join_storage(base, "s/default-1", "x")
    if isinstance(fs, pafs.S3FileSystem):
        assert joined_fs.region == "us-east-1"  # options from the query were read


def test_study_store_joins_through_the_same_rule(tmp_path):
    store = StudyStore(f"s3://bucket/runs?{QUERY}")
    assert store.join("s", "explore") == f"s3://bucket/runs/s/explore?{QUERY}"
    assert store.fs_path("s", "explore") == "bucket/runs/s/explore"
    local = StudyStore(str(tmp_path))
    assert local.join("s", "explore") == local.fs_path("s", "explore") == f"{tmp_path}/s/explore"
