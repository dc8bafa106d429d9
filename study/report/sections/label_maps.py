"""What a cross-domain score was computed on: per evaluation set with a label map (`tag_map`,
`unseen` in its data entry), its gold entities, those renamed onto training's types and those
of types training never shows that were made O. Placed right after the extra-sets table, so
an F1 on another domain is never read without what was dropped to get it."""

from __future__ import annotations

import pandas as pd

from study.report.section import Section, Tables
from study.report.text import frame_table
from study.tracking.reading import StudyRecord

NAME = "label_maps"
COUNTS = ("entities", "entities_mapped", "entities_dropped")  # `<set>_<count>` trial metrics
INTRO = (
    "Label maps of the evaluation sets: each set's entity types were renamed onto training's "
    "by its `tag_map`, and with `unseen: as_o` gold entities of types training never shows "
    "were made O, so its F1 above is computed on the scored entities only (a prediction on a "
    "dropped entity counts against precision)."
)


def label_map_table(record: StudyRecord) -> pd.DataFrame:
    """One row per set whose trials reported label-map counts. The counts depend on the data
    alone, so every trial reports the same ones; the largest seen stands for them all."""
    t = record.trials
    rows = []
    for name in ("dev", "test", *record.extra_sets):
        columns = [f"{name}_{count}" for count in COUNTS]
        if not all(c in t and t[c].notna().any() for c in columns):
            continue
        entities, mapped, dropped = (int(t[c].max()) for c in columns)
        share = f" ({(entities - dropped) / entities:.0%})" if entities else ""
        rows.append(
            {
                "set": name,
                "gold entities": entities,
                "renamed by tag_map": mapped,
                "made O (unseen type)": dropped,
                "scored": f"{entities - dropped}{share}",
            }
        )
    return pd.DataFrame(rows)


def _tables(record: StudyRecord) -> Tables:
    table = label_map_table(record)
    return {} if table.empty else {NAME: table}  # no label map: no table, no CSV


def _markdown(record: StudyRecord, tables: Tables) -> str:
    table = tables.get(NAME)
    return "" if table is None else f"{INTRO}\n\n{frame_table(table)}"


SECTION = Section(
    name=NAME,
    slot="results",
    order=0,
    tables=_tables,
    markdown=_markdown,
)
