"""The tag scheme every reader ends in (IOB2), and how data messages quote tags and origins.

Corpora in the wild mix IOB1 (an entity may start with I-) and IOB2; seqeval's strict mode
and the B-/I- label map assume IOB2, so each reader normalises once, at the door, through
`to_iob2`. The message helpers live here because every reader and the label map point at a
sentence's origin and quote a bad value the same way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainables.errors import DataError

_TAG = re.compile(r"(O|[BI]-\S+)")


def located(origin: str) -> str:
    """`origin: ` as a message prefix, or nothing where a sentence's origin is unknown."""
    return f"{origin}: " if origin else ""


def shortened(value: str, limit: int = 80) -> str:
    """Quote a value for a one-line message, cut so a non-CoNLL file can't flood the terminal."""
    text = value if len(value) <= limit else value[: limit - 3] + "..."
    return repr(text)


def check_tag(tag: str, origin: str) -> None:
    if not _TAG.fullmatch(tag):
        raise DataError(
            f"{located(origin)}tag {shortened(tag)} is not in the BIO/IOB2 scheme "
            "(expected O, B-TYPE or I-TYPE)"
        )


SPAN_TYPE = "ENT"  # the one entity type of `untyped` data (trainables/data/sources)


def untyped(tags: Sequence[str]) -> tuple[str, ...]:
    """Entity spans without their types: every B-x becomes B-ENT and every I-x I-ENT, so a
    corpus's spans make a tagging task of their own (an intermediate stage, say)."""
    return tuple(tag if tag == "O" else f"{tag[:2]}{SPAN_TYPE}" for tag in tags)


def to_iob2(tags: Sequence[str], origin: str = "") -> tuple[str, ...]:
    """Rewrite IOB1 or IOB2 tags as IOB2.

    Schemes we cannot convert without guessing (BIOES, bare types) are refused rather than
    mangled.
    """
    out: list[str] = []
    previous = "O"
    for tag in tags:
        check_tag(tag, origin)
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            tag = "B-" + tag[2:]
        out.append(tag)
        previous = tag
    return tuple(out)
