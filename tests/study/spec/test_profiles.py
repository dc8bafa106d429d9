"""Profiles: merged key by key onto the base, `default` applied unless profile is None, and errors
in a profile pointing at the profile's line; every study in search_spaces/ loads under each of its
profiles."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from study import spec
from study.spec import Categorical, SpecError, load_study
from tests.study.spec.study_files import error_line, one_line_error_test, write

pytestmark = pytest.mark.usefixtures("offline")

BAD = [
    ("profile key", {"profiles.smoke.epochs": 1},
     "profiles.smoke.epochs: unknown key 'epochs'", "epochs: 1"),
]  # fmt: skip


test_errors_name_file_line_field_value_and_allowed = one_line_error_test(BAD)


def test_profile_deep_merges_onto_the_base(tmp_path, study):
    write(tmp_path, study)
    smoke = load_study("study", profile="smoke", folder=tmp_path)
    assert smoke.profile == "smoke"
    assert smoke.fixed == {"epochs": 1, "batch_size": 16}  # merged key by key
    assert smoke.grid == {"depth": (1,), "data_fraction": (0.1, 1.0)}  # the list is replaced
    assert smoke.seeds == 2
    assert smoke.raw["fixed"] == {"epochs": 1, "batch_size": 16}
    base = load_study("study", folder=tmp_path)  # no 'default' profile: the base is used
    assert base.profile is None and base.fixed["epochs"] == 3


def test_default_profile_is_applied_unless_profile_is_none(tmp_path, study):
    study["profiles"]["default"] = {"fixed": {"epochs": 2}}
    write(tmp_path, study)
    assert load_study("study", folder=tmp_path).fixed["epochs"] == 2
    assert load_study("study", profile=None, folder=tmp_path).fixed["epochs"] == 3


def test_profile_changing_a_distribution_type_replaces_it(tmp_path, study):
    choices = [1.0e-4, 2.0e-4, 3.0e-4, 4.0e-4]  # as many as explore samples: none drawn twice
    study["profiles"]["smoke"]["search"] = {"lr": {"type": "categorical", "choices": choices}}
    write(tmp_path, study)
    smoke = load_study("study", profile="smoke", folder=tmp_path)
    assert smoke.search["lr"] == Categorical(choices=tuple(choices))


def test_profile_null_takes_a_fixed_factor_out_so_the_profile_can_vary_it(tmp_path, study):
    study["profiles"]["default"] = {
        "fixed": {"batch_size": None, "epochs": None},
        "grid": {"batch_size": [8, 16]},
    }
    write(tmp_path, study)
    varied = load_study("study", folder=tmp_path)
    assert "batch_size" not in varied.fixed and "epochs" not in varied.fixed
    assert varied.grid["batch_size"] == (8, 16)
    base = load_study("study", profile=None, folder=tmp_path)
    assert base.fixed["batch_size"] == 16 and "batch_size" not in base.grid


def test_profile_can_switch_a_phase_off(tmp_path, study):
    study["profiles"]["smoke"]["phases"] = {"explore": None, "confirm": {"select": [{"lr": 1e-4}]}}
    write(tmp_path, study)
    smoke = load_study("study", profile="smoke", folder=tmp_path)
    assert smoke.explore is None and smoke.confirm.select == ({"lr": 1e-4},)


def test_hub_model_not_in_cache_keeps_depths_symbolic(tmp_path, study):
    write(tmp_path, study)
    cluster = load_study("study", profile="cluster", folder=tmp_path)
    assert (cluster.model_layers, cluster.model_heads) == (0, 0)
    assert cluster.grid["depth"] == ("full", "full-1")
    assert cluster.resources == {"cpu": 1.0, "gpu": 0.5}


def test_unknown_profile_lists_the_files_profiles(tmp_path, study):
    write(tmp_path, study)
    with pytest.raises(SpecError, match=r"no profile 'laptop'.*profiles: smoke, cluster$"):
        load_study("study", profile="laptop", folder=tmp_path)


def test_error_in_profile_points_at_the_profile_line(tmp_path, study):
    study["profiles"]["smoke"]["fixed"]["epochs"] = 0
    path = write(tmp_path, study)
    with pytest.raises(SpecError) as caught:
        load_study("study", profile="smoke", folder=tmp_path)
    line = error_line(caught.value, path)
    assert "profiles.smoke.fixed.epochs: 0 is not allowed: expected >= 1" in str(caught.value)
    assert path.read_text().splitlines()[line - 1].strip() == "epochs: 0"
    assert load_study("study", folder=tmp_path).fixed["epochs"] == 3  # the base is fine


REAL_STUDIES = sorted(spec.SEARCH_SPACES.glob("*.yaml")) if spec.SEARCH_SPACES.is_dir() else []


def real_profiles(path: Path) -> list[str | None]:
    profiles = (yaml.safe_load(path.read_text()) or {}).get("profiles") or {}
    return [None, *profiles]


@pytest.mark.parametrize(
    ("path", "profile"),
    [(p, prof) for p in REAL_STUDIES for prof in real_profiles(p)] or [pytest.param(None, None,
     marks=pytest.mark.skip(reason="no study files in search_spaces/ yet"))],
)  # fmt: skip
def test_every_real_study_loads_under_each_profile(path, profile):
    """Hub models not in the local cache load with unknown layer counts (see `load_study`)."""
    loaded = load_study(path.stem, profile=profile)
    assert loaded.grid and (loaded.explore or loaded.confirm)
