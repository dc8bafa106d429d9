"""The one reading of a depth (trainables/settings/layouts.py): `full` keeps every block,
`full-N` all but the top N (N >= 1), a number that many, null all; what the synthetic surface
reads is the same, and anything else is refused by each reader in its own words."""

from __future__ import annotations

import pytest

from trainables.errors import ConfigError
from trainables.settings import DepthError, Surface, blocks_kept, depth_cut


@pytest.mark.parametrize(
    ("depth", "kept"),
    [(None, 6), ("full", 6), ("full-1", 5), (" full - 4 ", 2), ("full-6", 0), (3, 3)],
)
def test_each_form_keeps_its_blocks(depth, kept):
    assert blocks_kept(depth, 6) == kept
    assert Surface(layers=6).arm({"depth": depth}).kept == kept


@pytest.mark.parametrize("depth", ["full-0", "half", "full-", "full+1", "full-1.5", "6"])
def test_other_text_is_refused(depth):
    with pytest.raises(DepthError):
        depth_cut(depth)
    with pytest.raises(ConfigError, match="an int or full-N"):
        Surface(layers=6).arm({"depth": depth})
