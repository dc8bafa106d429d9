"""The keys inside the values of some trial settings (a `data` mapping and each split's entry,
an intermediate stage, a budget, the synthetic surface's options), each with what it takes and
is for, gathered from the tables their checks read, so the study-file key reference
(study/spec/reference.py) describes exactly the keys that are accepted."""

from __future__ import annotations

import dataclasses

from trainables.data import relabel
from trainables.data.sources import DATA_KEYS
from trainables.data.sources._kinds import CORPUS_KINDS, SPLIT_KINDS
from trainables.settings.budget import BUDGET, KINDS, PLATEAU_KEYS
from trainables.settings.config import STAGE_KEYS
from trainables.settings.stage_config import INTERMEDIATE
from trainables.settings.surface import OPTION_HELP, SYNTHETIC, Surface, option_allowed


def _surface_options() -> dict[str, str]:
    options = {}
    for item in dataclasses.fields(Surface):
        default = "null" if item.default is None else item.default
        default = str(default).lower() if isinstance(default, bool) else default  # as YAML
        allowed = option_allowed(item.name)
        options[item.name] = f"{allowed} (default {default}): {OPTION_HELP[item.name]}"
    return options


def keys_inside_values() -> dict[str, dict[str, str]]:
    """Where the keys sit (a path prefix as the reference shows it) -> {key: description}."""
    corpora = {key: kind.entry_keys[key] for key, kind in CORPUS_KINDS.items()}
    entries = {k: text for kind in SPLIT_KINDS.values() for k, text in kind.entry_keys.items()}
    return {
        "data.": corpora | DATA_KEYS,
        "data.<split>.": entries | relabel.KEYS,
        f"{INTERMEDIATE}[].": STAGE_KEYS,
        f"{BUDGET}.": KINDS,
        f"{BUDGET}.until_plateau.": PLATEAU_KEYS,
        f"trainable.{SYNTHETIC}.": _surface_options(),
    }
