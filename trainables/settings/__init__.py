"""Everything the study driver and the report may know about a trial, with no torch behind it.

`study` imports from here and from nowhere else in `trainables` (besides the Tune entry point,
`trainables.tune_adapter.train_tagger`), so the driver checks and plans a study without loading
torch or transformers; tests/study/test_import_graph.py holds both rules. The modules in this
package describe a trial (its config, stages, precision, model source, the synthetic surface);
the names below from `trainables.errors`, `trainables.input_files`, `trainables.yaml_reading`,
`trainables.data.sources`, `trainables.measures.fingerprints` and `trainables.training.curves`
are their torch-free parts,
which sit outside this package because `trainables.data` is read by this package's checks and
by the trainer alike.
"""

from trainables.data.sources import (
    CORPUS_KINDS,
    SPLITS,
    UNTYPED,
    data_inputs,
    load_checked_splits,
)
from trainables.data.sources.conll import ConllSource
from trainables.data.sources.huggingface import HuggingFaceSource
from trainables.errors import (
    ConfigError,
    ModelError,
    SettingError,
    UserInputError,
    first_line,
    joined,
    printable,
)
from trainables.input_files import MAX_SETTINGS_BYTES, open_regular, read_bounded
from trainables.measures.fingerprints import FILE_NAME as FINGERPRINT_FILE
from trainables.measures.fingerprints import LayerFingerprint
from trainables.measures.fingerprints.compare import compare_pairs
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
from trainables.settings.command_line import (
    EXIT_BAD_INPUT,
    OneLineParser,
    add_set_option,
    exit_codes,
    leaving_quickly,
    trial_parser,
    write_or_check,
)
from trainables.settings.config import (
    FIXED_ONLY,
    LAYER_FIELDS,
    MAX_SEED,
    Architecture,
    TrialConfig,
    normalized,
)
from trainables.settings.layouts import (
    DEPTH_FORMS,
    LAYOUTS,
    RELATIVE_DEPTH,
    layout_of,
    longest_window,
)
from trainables.settings.model_source import (
    EMBEDDED_MODEL,
    TINY_CONFIG,
    TINY_MODEL,
    looks_like_path,
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
from trainables.settings.reported import evaluation_metrics
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
from trainables.training.curves import FINAL_GAIN_RULE, final_gain
from trainables.training.trial_folder import MODEL_FOLDER
from trainables.yaml_reading import Loader, YamlLimitError, bool_word, parse_value

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
    "MODEL_FOLDER",
    "Architecture",
    "Budget",
    "BudgetError",
    "EXIT_BAD_INPUT",
    "OneLineParser",
    "PlateauWatch",
    "add_set_option",
    "budget_shape",
    "check_patience",
    "exit_codes",
    "leaving_quickly",
    "parse_budget",
    "trial_parser",
    "write_or_check",
    "AUTO",
    "BF16",
    "CORPUS_KINDS",
    "DEPTH_FORMS",
    "EMBEDDED_MODEL",
    "FINGERPRINT_FILE",
    "FP32",
    "INTERMEDIATE",
    "INTERMEDIATE_STEPS",
    "LAYOUTS",
    "RELATIVE_DEPTH",
    "SPLITS",
    "SYNTHETIC",
    "TAGGER",
    "TINY_CONFIG",
    "TINY_MODEL",
    "TRIAL_CONFIG",
    "UNTYPED",
    "ConfigError",
    "ConllSource",
    "HuggingFaceSource",
    "LayerFingerprint",
    "Loader",
    "YamlLimitError",
    "ModelError",
    "SettingError",
    "StageError",
    "Surface",
    "TrialConfig",
    "UserInputError",
    "bool_word",
    "check_option",
    "keys_inside_values",
    "compare_pairs",
    "data_inputs",
    "first_line",
    "host_has_native_bf16",
    "instruction_caps",
    "joined",
    "final_gain",
    "FINAL_GAIN_RULE",
    "printable",
    "open_regular",
    "read_bounded",
    "MAX_SETTINGS_BYTES",
    "layout_of",
    "longest_window",
    "evaluation_metrics",
    "load_checked_splits",
    "looks_like_path",
    "no_native_bf16",
    "normalized",
    "parse_value",
    "read_config_json",
    "resolve_model",
    "resolve_precision",
    "stage_label",
    "stage_name",
    "stage_prefix",
]
