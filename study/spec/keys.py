"""The keys a study file may hold, defined once for the reader, the profiles and the checks."""

from __future__ import annotations

# What a factor is (one value per study, layer-indexed, ...) is written on its TrialConfig field
# (trainables/settings/config.py), and read from there as FIXED_ONLY and LAYER_FIELDS.
from trainables.settings import TrialConfig

TOP_LEVEL_KEYS = (
    "description",
    "trainable",
    "model",
    "data",
    "metric",
    "grid",
    "search",
    "fixed",
    "fixed_from",
    "seeds",
    "phases",
    "resources",
    "max_failures",
    "compare",
    "analysis",
    "profiles",
)
# Trial settings that are not factors, and the top-level key that sets each instead.
SET_AT_TOP = {
    "metric": "metric",
    "trainable": "trainable",
    "model": "model",
    "model_revision": "model",
    "data": "data",
    "seed": "seeds",
    "data_seed": "phases.confirm.data_seeds",
}
FACTORS = tuple(name for name in TrialConfig.field_names() if name not in SET_AT_TOP)
SECTIONS = ("grid", "search", "fixed")
