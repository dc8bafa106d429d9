"""transformers' own output kept out of a trial's and a command's output: its warning tables
(a checkpoint with a pooler loaded into an encoder without one, which is intended here) and
its progress bars (`Writing model shards` at every `save_pretrained`, which a study's workers
would forward to the driver's terminal as ANSI bars), through the library's own switches."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from transformers.utils import logging as hf_logging


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """For the block: transformers logs errors only and draws no progress bar; then both as
    they were."""
    previous, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(previous)
        if bars:
            hf_logging.enable_progress_bar()
