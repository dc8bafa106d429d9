"""`longest_window` (trainables/settings/layouts.py), what the driver checks `max_length`
against before any trial runs, is where each family's encoder really stops: a window of that
many sub-words runs, one more fails in the embeddings; a family without a table of absolute
positions (None) runs past the config's max_position_embeddings."""

from __future__ import annotations

import pytest
import torch

from trainables.model.tiny import MODEL_TYPES, tiny_encoder
from trainables.settings import longest_window

CASES = [(family, {}) for family in MODEL_TYPES] + [
    ("deberta-v2", {"position_biased_input": True})  # the tiny one has relative positions only
]


def _runs(encoder, length: int) -> bool:
    ids = torch.full((1, length), 10)
    try:
        with torch.no_grad():
            encoder(input_ids=ids, attention_mask=torch.ones_like(ids))
    except (IndexError, RuntimeError):
        return False
    return True


@pytest.mark.parametrize(("family", "overrides"), CASES, ids=[f"{f}{o or ''}" for f, o in CASES])
def test_the_longest_window_is_where_the_encoder_stops(family, overrides):
    encoder = tiny_encoder(family, 2, **overrides)
    window = longest_window(encoder.config.to_dict())
    if window is None:
        assert _runs(encoder, 2 * encoder.config.max_position_embeddings)
    else:
        assert _runs(encoder, window) and not _runs(encoder, window + 1)


def test_a_config_that_does_not_say_is_unknown():
    assert longest_window({"model_type": "bert"}) is None
    assert longest_window({"model_type": "roberta", "max_position_embeddings": 514}) is None
    assert longest_window({"model_type": "no-such-family", "max_position_embeddings": 8}) is None
