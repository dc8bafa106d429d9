"""Which training sentences a trial uses at a given `data_fraction`."""

from __future__ import annotations

import numpy as np

from trainables.errors import ConfigError


def nested_fraction_indices(n: int, fraction: float, seed: int) -> list[int]:
    """Indices of the training subset used at `fraction` of the data.

    Every fraction takes a prefix of the same seed-fixed permutation, so for one seed the 1%
    subset lies inside the 10% subset: a learning curve then measures more data, not
    different data. Indices come back sorted so the subset keeps corpus order.
    """
    if not 0.0 < fraction <= 1.0:
        raise ConfigError(f"data_fraction {fraction!r} must be in (0, 1]")
    if fraction == 1.0:
        return list(range(n))
    keep = min(n, max(1, round(fraction * n)))
    order = np.random.default_rng(seed).permutation(n)
    return sorted(order[:keep].tolist())
