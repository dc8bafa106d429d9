"""The keys a study file may hold, defined once for the reader, the profiles and the checks."""

from __future__ import annotations

# What a factor is (one value per study, layer-indexed, ...) is written on its TrialConfig field
# (trainables/settings/config.py), and read from there as FIXED_ONLY and LAYER_FIELDS.
from trainables.settings import TrialConfig

# Each key a study file may hold at its top, with what it takes and is for: the checks read the
# keys, docs/study-keys.md (study/spec/reference.py) the descriptions.
TOP_LEVEL = {
    "description": "text: what the study asks; shown by --dry-run and in the report",
    "trainable": "`tagger` (the default), `synthetic` or `{synthetic: {option: value}}`: what "
    "trains; the synthetic response surface tests the machinery, never a finding",
    "model": "`minilm` (embedded), `tiny` (random, for smoke runs), a local model folder or a "
    "hub id: the encoder every trial fine-tunes",
    "data": "a mapping of sources (below; default `{embedded: wnut16}`): the corpus, plus "
    "extra evaluation sets",
    "metric": "`{name, mode}` (default `{name: dev_f1, mode: max}`): the study metric every "
    "evaluation reports, which the search, ASHA and `until_plateau` follow",
    "grid": "a mapping of setting: list of values: the arms, one per combination",
    "search": "a mapping of setting: distribution: what the explore phase samples in each arm",
    "fixed": "a mapping of setting: value: the same in every trial",
    "fixed_from": "a mapping of fixed setting: `{study, seeds}`: which study chose a fixed "
    "value, on which seeds (the report lists it as a threat to validity)",
    "seeds": "a count n (each phase takes n fresh seeds) or a list (the pool the phases take "
    "their seeds from, in order)",
    "phases": "`{explore, confirm}`, one or both: choose each arm's configuration, then "
    "estimate it on held-out seeds",
    "resources": "`{cpu, gpu}` (default `{cpu: 1, gpu: 0}`, fractions allowed): what one "
    "trial holds",
    "max_failures": "an integer >= 0 (default 0): retries of a trial that raises",
    "compare": "`{baseline: {setting: value}}`: compare each arm with the baseline arm "
    "instead of every arm with every other",
    "analysis": "the declared analysis, fixed before any trial runs (below)",
    "profiles": "a mapping of profile name: any top-level key but `profiles`, deep-merged over "
    "the file (`null` removes a key); `--profile NAME` chooses one",
}
TOP_LEVEL_KEYS = tuple(TOP_LEVEL)
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
