"""Each arm checked as a whole, once every section is valid on its own: a truncated arm's layer
indices against its own depth (surgery happens after truncation), and the arm's settings
together as one `TrialConfig`, which checks how fields combine."""

from __future__ import annotations

import itertools
from typing import Any

from study.spec.distributions import Distribution
from study.spec.document import Doc, FieldPath, count, is_int, show
from study.spec.factors import Shape, allowed_part, check_layers
from study.spec.validated import ConfirmPhase
from trainables.errors import ConfigError, SettingError
from trainables.settings import LAYER_FIELDS, TrialConfig


def check_arms(
    doc: Doc,
    grid: dict[str, tuple],
    fixed: dict,
    search: dict[str, Distribution],
    confirm: ConfirmPhase | None,
    shape: Shape,
    top: dict,
) -> None:
    """Check each arm as a whole: layer indices against the arm's own depth (surgery happens
    after truncation) and one TrialConfig built from the arm's settings."""
    names = list(grid)
    samples = confirm.select if confirm and not isinstance(confirm.select, str) else ()
    for picks in itertools.product(*(range(len(grid[name])) for name in names)):
        arm = {name: grid[name][i] for name, i in zip(names, picks, strict=True)}
        where = {name: ("grid", name, i) for name, i in zip(names, picks, strict=True)}
        where.update({name: ("fixed", name) for name in fixed})
        settings = {**fixed, **arm}
        _check_arm_layers(doc, settings, where, search, samples, shape)
        try:
            TrialConfig.from_dict({**settings, **top, "seed": 0})
        except SettingError as err:  # e.g. the budget against the arm's eval_every: at its line
            raise doc.fail((*where.get(err.setting, ("grid",)), *err.path), err.reason) from None
        except (ConfigError, TypeError, ValueError) as err:
            raise doc.fail(
                ("grid",), f"the arm {show(arm)} is not allowed: {allowed_part(err)}"
            ) from None


def _check_arm_layers(
    doc: Doc, settings: dict, where: dict, search: dict, samples: tuple, shape: Shape
) -> None:
    depth = settings.get("depth")
    if not is_int(depth) or depth == shape.layers:
        return  # already checked against the full model
    _, depth_name = doc.locate(where["depth"])
    why = f"arms with depth {depth} ({depth_name}) keep {count(depth, 'layer')}"
    for name in LAYER_FIELDS:
        found = [(where[name], settings[name])] if name in settings else []
        found += _searched_values(search, name)
        found += [
            (("phases", "confirm", "select", i, name), s[name])
            for i, s in enumerate(samples)
            if name in s
        ]
        for path, value in found:
            check_layers(doc, path, name, value, depth, shape.heads, why)


def _searched_values(search: dict[str, Distribution], name: str) -> list[tuple[FieldPath, Any]]:
    dist = search.get(name)
    if dist is None:
        return []
    return [(("search", name, *where), value) for where, value in dist.written_values()]
