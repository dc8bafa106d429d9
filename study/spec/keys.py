"""The keys a study file may hold, defined once for the reader, the profiles and the checks."""

from __future__ import annotations

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
    "data": "data",
    "seed": "seeds",
    "data_seed": "phases.confirm.data_seeds",
}
# Settings a study holds one value of, under `fixed` only, and why.
# Settings with one value for the whole study, and why.
FIXED_ONLY = {
    "precision": "a study never mixes precisions across its arms or trials",
    "fingerprint": "it changes what a trial records, not what it learns",
    "fingerprint_max_bytes": "it changes what a trial records, not what it learns",
}
FACTORS = tuple(name for name in TrialConfig.field_names() if name not in SET_AT_TOP)
SECTIONS = ("grid", "search", "fixed")
# Settings whose valid range depends on how many blocks the (truncated) encoder has.
LAYER_FIELDS = ("reinit_from", "freeze", "reinit_heads")
