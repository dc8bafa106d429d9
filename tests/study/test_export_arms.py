"""`--arm` in the forms a reader types (study/export/choose.py `resolve_arm`): the arm id,
a depth as the study file wrote it (`full-1`) or as the report shows it (`5`), a number in
either spelling, and a subset of factors that names one arm; ambiguity lists the matches."""

from __future__ import annotations

import pandas as pd
import pytest

from study.export.choose import choose_trial, resolve_arm
from study.tracking.reading import StudyRecord
from trainables.errors import UserInputError


def _record(arms: dict[str, dict], grid: dict) -> StudyRecord:
    rows = [
        {"arm": arm, "phase": "confirm", "status": "completed", "seed": seed,
         "run_id": f"{arm}-{seed}", "dev_f1": 0.5 + 0.01 * seed}
        for arm in arms for seed in (2, 3)
    ]  # fmt: skip
    return StudyRecord(
        name="ner_depth", run_id="r", tracking_uri="sqlite:///x", tags={},
        plan={"grid": grid, "metric": {"name": "dev_f1", "mode": "max"}},
        arms=arms, arm_runs={}, trials=pd.DataFrame(rows),
    )  # fmt: skip


ONE_FRACTION = _record(
    {"depth=6,data_fraction=1": {"depth": 6, "data_fraction": 1.0},
     "depth=5,data_fraction=1": {"depth": 5, "data_fraction": 1.0}},
    {"depth": ["full", "full-1"], "data_fraction": [1.0]},
)  # fmt: skip
TWO_FRACTIONS = _record(
    {f"depth={d},data_fraction={f:g}": {"depth": d, "data_fraction": f}
     for d in (6, 5) for f in (0.3, 1.0)},
    {"depth": ["full", "full-1"], "data_fraction": [0.3, 1.0]},
)  # fmt: skip


@pytest.mark.parametrize(
    ("typed", "arm"),
    [
        ("depth=5,data_fraction=1", "depth=5,data_fraction=1"),
        ("depth=full-1", "depth=5,data_fraction=1"),
        ("depth=5", "depth=5,data_fraction=1"),
        ("depth=full", "depth=6,data_fraction=1"),
        ("data_fraction=1.0,depth=full-1", "depth=5,data_fraction=1"),
        (" depth = full-1 ", "depth=5,data_fraction=1"),
    ],
)
def test_the_forms_a_reader_types(typed: str, arm: str) -> None:
    assert resolve_arm(ONE_FRACTION, typed) == arm


def test_the_documented_export_command_names_its_trial() -> None:
    chosen = choose_trial(ONE_FRACTION, "depth=full-1", 2, best=False)
    assert (chosen.arm, chosen.seed, chosen.run_id) == ("depth=5,data_fraction=1", 2,
                                                        "depth=5,data_fraction=1-2")  # fmt: skip
    assert choose_trial(ONE_FRACTION, "depth=5", None, best=True).seed == 3


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("depth=full-1", "names 2 arms of study ner_depth: depth=5,data_fraction=0.3; "
                         "depth=5,data_fraction=1"),
        ("depth=4", "has no such arm"),
        ("dept=5", "has no factor 'dept' (did you mean 'depth'?)"),
        ("full-1", "FACTOR=VALUE pairs"),
    ],
)  # fmt: skip
def test_ambiguous_and_unknown_names_are_one_line(typed: str, says: str) -> None:
    with pytest.raises(UserInputError, match=None) as err:
        resolve_arm(TWO_FRACTIONS, typed)
    assert says in str(err.value) and "\n" not in str(err.value)
    assert resolve_arm(TWO_FRACTIONS, "depth=full-1,data_fraction=0.3") == (
        "depth=5,data_fraction=0.3"
    )
