"""Which code produced a study's numbers: the code version of each driver that ran it, as
the study run recorded them (study/tracking/start.py), named in the report's header and
reproducibility block, and a threat when a resume ran other code."""

from __future__ import annotations

from study.names import CODE_TAG
from study.tracking.reading import StudyRecord, listed_code_versions


def code_versions(record: StudyRecord) -> list[str]:
    """The code each driver of the study ran, in order (one entry unless a resume ran other
    code; a study run recorded before the list existed has its first driver's only)."""
    return listed_code_versions(record.tags) or [record.tags.get(CODE_TAG, "?")]


def code_text(record: StudyRecord) -> str:
    """The code as the report's header names it: `abc`, or `abc`, resumed with `def`."""
    first, *later = code_versions(record)
    return f"`{first}`" + "".join(f", resumed with `{v}`" for v in later)


def code_threats(record: StudyRecord) -> list[str]:
    """A study resumed with other code: trials trained by different drivers may differ."""
    versions = code_versions(record)
    if len(versions) < 2:
        return []
    return [
        f"The study was resumed with other code ({code_text(record)}): unless the changes "
        "left training alone, trials trained by different drivers are not comparable, and "
        "the code named first did not produce every number here."
    ]
