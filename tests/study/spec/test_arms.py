"""Arms: each arm checked against its own depth, the one-head-at-a-time shorthand expanded into
arms, and the comparison baseline resolved like the grid."""

from __future__ import annotations

import pytest

from study.spec import SpecError, load_study
from tests.study.spec.study_files import error_line, write

pytestmark = pytest.mark.usefixtures("offline")


def test_arm_checks_use_the_arms_own_depth(tmp_path, study):
    study["grid"]["depth"] = ["full", 1]
    study["fixed"]["reinit_from"] = 2
    path = write(tmp_path, study)
    with pytest.raises(SpecError) as caught:
        load_study(str(path))
    assert str(caught.value).endswith(
        "fixed.reinit_from: 2 is not allowed: arms with depth 1 (grid.depth[1]) keep 1 layer; "
        "use 0..1"
    )


def test_one_head_at_a_time_shorthand_expands_to_arms(tmp_path, study):
    study["grid"] = {"reinit_heads": {"one_head_in_blocks": [0, -1]}}
    study["compare"] = {"baseline": {"reinit_heads": []}}
    del study["profiles"]
    loaded = load_study(write(tmp_path, study).stem, folder=tmp_path)
    heads = [[[0, h]] for h in range(4)] + [[[2, h]] for h in range(4)]  # 3 layers, 4 heads
    assert list(loaded.grid["reinit_heads"]) == [[], *heads]
    assert loaded.compare_baseline == {"reinit_heads": []}


def test_compare_baseline_is_resolved_like_the_grid(tmp_path, study):
    study["compare"] = {"baseline": {"depth": "full"}}
    loaded = load_study(write(tmp_path, study).stem, folder=tmp_path, profile=None)
    assert loaded.compare_baseline == {"depth": 3}


@pytest.mark.parametrize(
    ("compare", "expected"),
    [
        ({"baseline": {"lr": 1e-4}}, "compare.baseline.lr: 'lr' is not a grid factor; grid "
                                     "factors: depth, data_fraction"),
        ({"baseline": {"data_fraction": 0.5}}, "compare.baseline.data_fraction: 0.5 is not "
                                               "allowed: one of the grid's values: 0.1, 1.0"),
        ({"against": {}}, "compare.against: unknown key 'against' for compare"),
        ({"baseline": [1]}, "compare.baseline: [1] is not allowed: a mapping of grid factors"),
    ],
)  # fmt: skip
def test_bad_compare_is_one_line_naming_the_field(tmp_path, study, compare, expected):
    study["compare"] = compare
    path = write(tmp_path, study)
    with pytest.raises(SpecError) as caught:
        load_study(path.stem, folder=tmp_path, profile=None)
    error_line(caught.value, path)
    assert expected in str(caught.value)


def test_bad_head_block_names_the_shorthand(tmp_path, study):
    study["grid"] = {"reinit_heads": {"one_head_in_blocks": [0, 3]}}
    path = write(tmp_path, study)
    with pytest.raises(SpecError) as caught:
        load_study(path.stem, folder=tmp_path, profile=None)
    error_line(caught.value, path)
    assert "grid.reinit_heads.one_head_in_blocks[1]: 3 is not allowed" in str(caught.value)
