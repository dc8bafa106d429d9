"""One-line errors in `search` distributions: bounds, integer steps, the kind a factor takes,
unknown kinds and keys. (What each kind reads into is in test_search_distributions.py.)"""

from __future__ import annotations

import pytest

from tests.study.spec.study_files import one_line_error_test

pytestmark = pytest.mark.usefixtures("offline")

BAD = [
    ("low above high", {"search.lr.low": 1.0e-3},
     "search.lr.low: 0.001 is not allowed: low must be below high (0.0003)", "low: 0.001"),
    ("loguniform low zero", {"search.lr.low": 0.0},
     "search.lr.low: 0.0 is not allowed: a loguniform low must be > 0", "low: 0.0"),
    ("int bounds not ints", {"search.max_length": {"type": "int", "low": 8.5, "high": 32}},
     "search.max_length.low: 8.5 is not allowed: an integer bound", "low: 8.5"),
    ("int step", {"search.max_length": {"type": "int", "low": 8, "high": 32, "step": 0}},
     "search.max_length.step: 0 is not allowed", "step: 0"),
    ("uniform on an int factor", {"search.eval_every": {"type": "uniform", "low": 1, "high": 4}},
     "search.eval_every.type: 'uniform' is not allowed: eval_every takes an integer or null; "
     "use int or categorical", "type: uniform"),
    ("categorical empty", {"search.dropout": {"type": "categorical", "choices": []}},
     "search.dropout.choices: [] is not allowed: a non-empty list", "choices: []"),
    ("unknown distribution", {"search.lr.type": "normal"},
     "search.lr.type: 'normal' is not allowed: one of loguniform", "type: normal"),
    ("distribution type as a list", {"search.lr.type": ["loguniform"]},
     "search.lr.type: ['loguniform'] is not allowed: one of loguniform", "type:"),
    ("distribution key", {"search.lr.choices": [1]},
     "search.lr.choices: unknown key 'choices' for a loguniform distribution", "choices:"),
    ("bound outside the trial range", {"search.warmup_ratio": {"type": "uniform", "low": 0.0,
     "high": 1.0}}, "search.warmup_ratio.high: 1.0 is not allowed: expected in [0, 1)",
     "high: 1.0"),
]  # fmt: skip


test_errors_name_file_line_field_value_and_allowed = one_line_error_test(BAD)
