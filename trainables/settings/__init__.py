"""A trial's settings, described without torch: what the study driver and the report may know
about a trial before one runs.

`study` imports a trial's settings from here (the modules behind it stay free to move), and the
Tune entry point from `trainables.tune_adapter`; the few other torch-free modules of
`trainables` it may import (errors, YAML reading, the command line, data sources, fingerprints)
it imports from their own packages: tests/study/test_import_graph.py names them and holds the
rule, and tests/trainables/settings/test_settings_import.py that importing this package loads
neither torch nor scipy nor pyarrow.
"""

from trainables.hub import looks_like_path
from trainables.settings.budget import (
    BUDGET,
    PLATEAU_STOPPED,
    Budget,
    BudgetError,
    PlateauWatch,
    budget_shape,
    check_patience,
    parse_budget,
)
from trainables.settings.config import (
    FIXED_ONLY,
    LAYER_FIELDS,
    MAX_SEED,
    TUNABLE,
    Architecture,
    TrialConfig,
    normalized,
)
from trainables.settings.layouts import (
    DEPTH_FORMS,
    LAYOUTS,
    DepthError,
    blocks_kept,
    depth_cut,
    layout_of,
    longest_window,
)
from trainables.settings.model_source import (
    EMBEDDED_MODEL,
    TINY_CONFIG,
    TINY_MODEL,
    read_config_json,
    resolve_model,
)
from trainables.settings.precision import (
    AUTO,
    BF16,
    FP32,
    host_has_native_bf16,
    instruction_caps,
    no_native_bf16,
    resolve_precision,
)
from trainables.settings.reported import each_time_test_name, evaluation_metrics
from trainables.settings.stage_config import (
    INTERMEDIATE,
    INTERMEDIATE_STEPS,
    StageError,
    stage_label,
    stage_name,
    stage_prefix,
)
from trainables.settings.surface import SYNTHETIC, TAGGER, Surface, check_option
from trainables.settings.value_keys import keys_inside_values

# the key of a Ray Tune trial's config under which the driver puts the trial's settings, and
# from which the Tune entry point (trainables/tune_adapter.py) reads them
TRIAL_CONFIG = "trial"
# the key beside it under which the driver may put the least seconds between a trial's
# evaluation checkpoints (absent: one at every evaluation; the final report always has one)
CHECKPOINT_EVERY_S = "checkpoint_every_s"

__all__ = [
    "BUDGET",
    "CHECKPOINT_EVERY_S",
    "PLATEAU_STOPPED",
    "FIXED_ONLY",
    "LAYER_FIELDS",
    "MAX_SEED",
    "TUNABLE",
    "Architecture",
    "Budget",
    "BudgetError",
    "PlateauWatch",
    "budget_shape",
    "check_patience",
    "parse_budget",
    "AUTO",
    "BF16",
    "DEPTH_FORMS",
    "EMBEDDED_MODEL",
    "FP32",
    "INTERMEDIATE",
    "INTERMEDIATE_STEPS",
    "LAYOUTS",
    "SYNTHETIC",
    "TAGGER",
    "TINY_CONFIG",
    "TINY_MODEL",
    "TRIAL_CONFIG",
    "StageError",
    "Surface",
    "TrialConfig",
    "check_option",
    "DepthError",
    "blocks_kept",
    "depth_cut",
    "keys_inside_values",
    "host_has_native_bf16",
    "instruction_caps",
    "layout_of",
    "longest_window",
    "each_time_test_name",
    "evaluation_metrics",
    "looks_like_path",
    "no_native_bf16",
    "normalized",
    "read_config_json",
    "resolve_model",
    "resolve_precision",
    "stage_label",
    "stage_name",
    "stage_prefix",
]
