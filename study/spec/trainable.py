"""`trainable`: what a study's trials train. The tagger (the default), or the synthetic
response surface of `trainables/settings/surface.py` for testing the machinery:

    trainable: synthetic                                  # the surface's defaults
    trainable: {synthetic: {noise: 0.02, step_s: 0.1}}   # with options

A synthetic study reads no model and no data: its encoder's shape is the surface's `layers`
and `heads`, and a `model` or `data` key is refused rather than recorded as if it were used.
"""

from __future__ import annotations

from typing import Any

from study.spec.document import Doc
from study.spec.factors import Shape, allowed_part
from trainables.errors import ConfigError
from trainables.settings import SYNTHETIC, TAGGER, Surface, check_option

SYNTHETIC_MODEL = "synthetic"  # what a synthetic study records as its model
ALLOWED = f"'{TAGGER}' (the default), '{SYNTHETIC}', or {{{SYNTHETIC}: {{option: value}}}}"


def trainable_setting(doc: Doc) -> tuple[str | dict[str, Any], Surface | None]:
    """The checked setting as trials receive it (a synthetic one with every option filled
    in, so MLflow records the whole surface) and the surface, None for the tagger."""
    value = doc.data.get("trainable")
    if value is None or value == TAGGER:
        return TAGGER, None
    if value == SYNTHETIC:
        options = {}
    elif isinstance(value, dict) and list(value) == [SYNTHETIC]:
        options = value[SYNTHETIC] or {}
        doc.mapping(("trainable", SYNTHETIC), options, "a mapping of surface option: value")
    else:
        raise doc.bad(("trainable",), value, ALLOWED)
    path = ("trainable", SYNTHETIC)
    doc.check_keys(path, options, Surface.option_names(), "the synthetic surface")
    for name, option in options.items():
        try:
            check_option(name, option)
        except ConfigError as err:
            raise doc.bad((*path, name), option, allowed_part(err)) from None
    for unused in ("model", "data"):
        if doc.data.get(unused) is not None:
            raise doc.fail((unused,), f"a synthetic study reads no {unused}: remove it (the "
                           "surface's layers and heads stand for the model)")  # fmt: skip
    surface = Surface.from_options(options)
    return {SYNTHETIC: surface.options()}, surface


def surface_shape(surface: Surface) -> Shape:
    return Shape(surface.layers, surface.heads)
