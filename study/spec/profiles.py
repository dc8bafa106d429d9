"""Profiles: named overrides inside a study file (`smoke`, `cluster`, ...), checked when the
file is read and deep-merged onto the base when one is chosen."""

from __future__ import annotations

import copy
from typing import Any

from study.folder_names import name_problem
from study.spec.document import Doc
from study.spec.keys import TOP_LEVEL_KEYS


def check_profiles(doc: Doc) -> None:
    """Each profile is a mapping of top-level settings (anything but `profiles`)."""
    profiles = doc.data.get("profiles")
    if profiles is None:
        return
    if not isinstance(profiles, dict):
        raise doc.bad(("profiles",), profiles, "a mapping of profile name: settings to override")
    allowed = tuple(key for key in TOP_LEVEL_KEYS if key != "profiles")
    for name, override in profiles.items():
        path = ("profiles", str(name))
        problem = name_problem(name)
        if problem:
            raise doc.fail(path, f"profile name {name!r} cannot name its folders: {problem}")
        if override is not None and not isinstance(override, dict):
            raise doc.bad(path, override, "a mapping of settings to override, e.g. {seeds: 2}")
        doc.check_keys(path, override or {}, allowed)


def apply_profile(doc: Doc, profile: str | None) -> Doc:
    """The base without `profiles`, with `profile` merged on; errors then point at the
    profile's lines where it writes a field. See `study.spec.load_study` for the rules."""
    profiles = doc.data.get("profiles") or {}
    base = {key: value for key, value in doc.data.items() if key != "profiles"}
    if profile is None or (profile == "default" and "default" not in profiles):
        return Doc(doc.display, copy.deepcopy(base), doc.lines)
    if profile not in profiles:
        names = ", ".join(map(str, profiles)) or "(none)"
        raise doc.fail(("profiles",), f"no profile {profile!r} in this file; profiles: {names}")
    override = profiles[profile] or {}
    merged = _merge(base, override)
    _replace_retyped_distributions(merged, base, override)
    _unfix_nulls(merged, override)
    return Doc(doc.display, merged, doc.lines, profile)


def _unfix_nulls(merged: dict, override: dict) -> None:
    # A profile's `fixed: {lr: null}` takes the base's fixed value out (the trial default, or
    # the profile searches it): without this a profile could not search what the base fixes.
    fixed, nulls = merged.get("fixed"), override.get("fixed")
    if not (isinstance(fixed, dict) and isinstance(nulls, dict)):
        return
    for name, value in nulls.items():
        if value is None:
            fixed.pop(name, None)


def _merge(base: Any, override: Any) -> Any:
    if not (isinstance(base, dict) and isinstance(override, dict)):
        return copy.deepcopy(override)
    merged = copy.deepcopy(base)
    for key, value in override.items():
        merged[key] = _merge(base[key], value) if key in base else copy.deepcopy(value)
    return merged


def _replace_retyped_distributions(merged: dict, base: dict, override: dict) -> None:
    # Merging {type: categorical, choices: [...]} onto {type: loguniform, low, high} key by key
    # would leave low/high beside choices; a changed type means a new distribution.
    old, new = base.get("search"), override.get("search")
    if not (isinstance(old, dict) and isinstance(new, dict) and isinstance(merged["search"], dict)):
        return
    for name, dist in new.items():
        before = old.get(name)
        retyped = isinstance(dist, dict) and isinstance(before, dict)
        if retyped and dist.get("type", before.get("type")) != before.get("type"):
            merged["search"][name] = copy.deepcopy(dist)
