"""Sub-paths of a `--storage` location, for every form Ray accepts.

A storage URI may carry its filesystem's options in a query, as pyarrow documents for object
stores (`s3://bucket/x?endpoint_override=host:9000&scheme=http`). A sub-path belongs to the
URI's path, before that query: appending it to the whole string turns the query's last value
into a path (`scheme=http/study/...`), which pyarrow then refuses. Ray's own `Tuner.restore`
and `ExperimentAnalysis` take such a URI whole and split it themselves, so the driver hands
them the joined URI, query kept.
"""

from __future__ import annotations


def join_storage(root: str, *parts: str) -> str:
    """`root` (a local path, or a URI with an optional `?query`) with `parts` appended to its
    path, separated by single slashes; the query, if any, stays at the end."""
    tail = "/".join(p.strip("/") for p in parts if p.strip("/"))
    if not tail:
        return root
    # a local path is never parsed: "?" is an ordinary character in a file name
    head, sep, query = root.partition("?") if "://" in root else (root, "", "")
    scheme, marker, path = head.rpartition("://")
    # "file:///" and "memory://" keep their separator: their path is then "/tail"
    return f"{scheme}{marker}{path.rstrip('/')}/{tail}{sep}{query}"
