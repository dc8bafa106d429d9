"""`fixed_from`: where a fixed value was chosen, when another study chose it.

A value fixed for all arms is not neutral: if another study tuned it, it was tuned for that
study's arm and on that study's seeds. Declaring it, e.g.
`fixed_from: {lr: {study: ner_depth, seeds: [0, 1]}}`, lets the report name that choice as a
threat to validity, and warn louder when those seeds are also this study's confirm seeds.
"""

from __future__ import annotations

from typing import Any

from study.spec.document import Doc, suggest

ALLOWED = "a mapping of fixed settings to {study: NAME, seeds: [0, 1]}"
KEYS = {  # with what each takes and is for (docs/study-keys.md)
    "study": "a study name: the study that chose the value",
    "seeds": "a list of seeds >= 0: the seeds it chose the value on",
}


def fixed_provenance(doc: Doc, fixed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The checked `fixed_from` mapping ({} when absent or null): each key a setting under
    `fixed`, each value the study that chose it and the seeds it chose on."""
    value = doc.data.get("fixed_from")
    if value is None:
        return {}
    doc.mapping(("fixed_from",), value, ALLOWED)
    return {str(name): _source(doc, fixed, name, source) for name, source in value.items()}


def _source(doc: Doc, fixed: dict[str, Any], name: Any, source: Any) -> dict[str, Any]:
    path = ("fixed_from", str(name))
    if name not in fixed:
        known = tuple(fixed)
        raise doc.fail(path, f"{name!r} is not a setting under fixed{suggest(name, known)}; "
                       f"fixed settings: {', '.join(known) or 'none'}")  # fmt: skip
    doc.mapping(path, source, "a mapping {study: NAME, seeds: [0, 1]}")
    doc.check_keys(path, source, tuple(KEYS), "fixed_from")
    study = source.get("study")
    if not isinstance(study, str) or not study.strip():
        raise doc.bad((*path, "study"), study, "the name of the study that chose the value")
    seeds = source.get("seeds")
    if not isinstance(seeds, list) or not seeds:
        raise doc.bad((*path, "seeds"), seeds, "a list of the seeds that chose it, e.g. [0, 1]")
    checked = [doc.integer((*path, "seeds", i), s, 0, "a seed, >= 0") for i, s in enumerate(seeds)]
    doc.distinct((*path, "seeds"), seeds, checked)
    return {"study": study.strip(), "seeds": checked}
