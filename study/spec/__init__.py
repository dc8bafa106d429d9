"""Load and validate a study file from `search_spaces/` into a `StudySpec`.

A study runs for hours, possibly on a cluster, so every mistake that can be found by reading
the file (an unknown factor, a depth the model does not have, a confirm phase selecting from an
explore phase that does not exist) is reported before anything starts, as one line naming the
file, the line, the field, the bad value and what is allowed. The README's study-file section
lists the keys; `load_study` sums up how they combine. No Ray here: the spec is plain data
that `study.plan` expands.

One job per module: `reading` (the file and each field's line), `document` (the `Doc` every
check reports through, and the wording of its one-line errors), `profiles`, `overrides` (the
command line's `--set KEY=VALUE`), `paths` (files relative to the study file), `factors` (grid,
fixed, the value checks), `distributions` (the search kinds and their registry), `phases`
(seeds, explore, confirm, the declared analysis), `arms` (each arm as a whole), `build`
(`load_study` and the top-level settings), `validated` (the `StudySpec` it returns), `keys`
(the keys a study file may hold), `samplers` (the explore phase's Optuna samplers).
"""

from __future__ import annotations

from study.spec.build import load_study, model_config, study_error, study_field_error
from study.spec.distributions import (
    KINDS,
    Categorical,
    Distribution,
    IntRange,
    LogUniform,
    Uniform,
    finite_points,
)
from study.spec.document import FieldPath, SpecError
from study.spec.keys import FACTORS, SECTIONS, SET_AT_TOP, TOP_LEVEL_KEYS
from study.spec.overrides import Override, check_same_overrides, parse_overrides
from study.spec.reading import SEARCH_SPACES, display_path, known_studies
from study.spec.samplers import (
    DEFAULT_SAMPLER,
    RANDOM_DRAW,
    SAMPLERS,
    START_FROM,
    make_sampler,
    next_drawer,
)
from study.spec.validated import AshaSettings, ConfirmPhase, ExplorePhase, Metric, StudySpec

__all__ = [
    "DEFAULT_SAMPLER", "FACTORS", "KINDS", "RANDOM_DRAW", "SAMPLERS", "SEARCH_SPACES", "SECTIONS",
    "SET_AT_TOP", "START_FROM", "TOP_LEVEL_KEYS", "AshaSettings", "Categorical", "ConfirmPhase",
    "Distribution",
    "ExplorePhase", "FieldPath", "IntRange", "LogUniform", "Metric", "Override", "SpecError",
    "StudySpec", "Uniform", "check_same_overrides", "display_path", "finite_points",
    "known_studies", "load_study", "make_sampler", "model_config", "next_drawer",
    "parse_overrides", "study_error", "study_field_error",
]  # fmt: skip
