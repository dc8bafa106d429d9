"""Lan-DeMets alpha spending and the nominal level of each planned look.

A study that adds seeds in rounds looks at its data several times; each look may only use
the share of alpha the spending function gives it, so that the chance of any false
rejection over all looks stays at alpha. The boundaries come from a deterministic
recursion over the not-yet-crossed density (no Monte Carlo), checked in the tests against
the exact multivariate normal and published tables.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

SPENDING_KINDS = ("obrien_fleming", "pocock")

# A standard normal exceeds 9 with probability ~1e-19: the grid of the boundary recursion ends
# there, where no boundary can matter.
_Z_LIMIT = 9.0
# Simpson grid points per sd of the smaller of the two steps a grid serves; 12 puts the
# boundaries within ~1e-6 of the exact ones (tests compare with scipy's multivariate normal).
_POINTS_PER_SD = 12
_MAX_POINTS = 6001
_ROWS_PER_BLOCK = 512  # rows of the transition kernel held in memory at once


def spent_alpha(t: float, alpha: float, kind: str) -> float:
    """Alpha spent by information fraction t for a one-sided level alpha: the Lan-DeMets
    O'Brien-Fleming type 2 - 2 Phi(z_(1 - alpha/2) / sqrt(t)) (spends almost nothing early,
    so the final look keeps nearly the full level), or the Pocock type alpha ln(1 + (e - 1) t)
    (spends evenly, so early looks can stop a clear effect). Both spend alpha at t = 1.
    A two-sided test at alpha spends this at alpha/2 on each side, as the published symmetric
    designs (and gsDesign) do."""
    if not 0 < t <= 1:
        raise ValueError(f"an information fraction is in (0, 1], got {t}")
    if kind == "obrien_fleming":
        return float(2 * sps.norm.sf(sps.norm.isf(alpha / 2) / math.sqrt(t)))
    if kind == "pocock":
        return float(alpha * math.log1p((math.e - 1) * t))
    raise ValueError(f"unknown alpha spending {kind!r}; one of {', '.join(SPENDING_KINDS)}")


def nominal_levels(
    looks: Sequence[int], alpha: float, kind: str, sided: int = 2
) -> tuple[float, ...]:
    """Per look, the nominal p threshold that keeps the chance of any false rejection over all
    looks at alpha: two-sided (|Z_k| >= c_k, alpha/2 spent on each side) or one-sided
    (Z_k >= c_k, alpha spent on the one side, so that a one-sided test at alpha/2 has the
    boundaries of one side of the two-sided test at alpha, up to the rare paths that would
    cross both sides: ~1e-5 in z). A single look is plain alpha.
    Cached: the driver, the report and the simulations ask for the same plans over and over."""
    plan = checked_looks(looks)
    check_alpha(alpha)
    if sided not in (1, 2):
        raise ValueError(f"sided is 1 or 2, got {sided}")
    spent_alpha(1.0, alpha, kind)  # refuses an unknown kind before anything is cached
    return _levels(plan, float(alpha), kind, sided)


def checked_looks(looks: Sequence[int]) -> tuple[int, ...]:
    plan = tuple(looks)
    if (
        not plan
        or any(isinstance(n, bool) or int(n) != n or n < 1 for n in plan)
        or any(b <= a for a, b in zip(plan, plan[1:], strict=False))
    ):
        raise ValueError(f"looks must be strictly increasing positive seed counts, got {plan}")
    return tuple(int(n) for n in plan)


def check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha is in (0, 1), got {alpha}")


@functools.lru_cache(maxsize=512)
def _levels(looks: tuple[int, ...], alpha: float, kind: str, sided: int) -> tuple[float, ...]:
    if len(looks) == 1:
        return (alpha,)
    fractions = [n / looks[-1] for n in looks]
    per_side = [spent_alpha(t, alpha / sided, kind) for t in fractions]
    increments = np.diff([0.0, *per_side])  # each look's share, on one side
    bounds = _boundaries(fractions, increments, two_sided=sided == 2)
    return tuple(float(sided * sps.norm.sf(c)) for c in bounds)


def _boundaries(fractions: list[float], increments: np.ndarray, two_sided: bool) -> list[float]:
    """c_1..c_K one after another, each such that P(first crossing at look k) under H0 is that
    look's share of alpha (per side). Z_k = S_k / sqrt(t_k) with S a Brownian motion in
    information time, so corr(Z_j, Z_k) = sqrt(t_j / t_k). The sub-density of S_k on the paths
    that have not crossed yet is carried from look to look by numerical integration on a
    Simpson grid (deterministic, no Monte Carlo), so each c_k is a one-dimensional root."""
    steps = np.sqrt(np.diff([0.0, *fractions]))  # sd of each look's increment of S
    sides = 2 if two_sided else 1
    bounds = [float(sps.norm.isf(increments[0]))]  # P(|Z_1| >= c) = 2 x share: closed form
    grid, mass = _first_grid(fractions[0], bounds[0], steps, two_sided)
    for k in range(1, len(fractions)):
        share = sides * float(increments[k])
        bounds.append(_bound(grid, mass, steps[k], math.sqrt(fractions[k]), share, two_sided))
        if k < len(fractions) - 1:
            grid, mass = _next_grid(grid, mass, fractions[k], bounds[k], steps, k, two_sided)
    return bounds


def _first_grid(
    t: float, c: float, steps: np.ndarray, two_sided: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The continuation region of look 1 on a grid, with S_1 ~ N(0, t_1) on it."""
    grid, weights = _simpson_grid(t, c, min(steps[0], steps[1]), two_sided)
    return grid, weights * sps.norm.pdf(grid, 0.0, steps[0])


def _next_grid(
    grid: np.ndarray,
    mass: np.ndarray,
    t: float,
    c: float,
    steps: np.ndarray,
    k: int,
    two_sided: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Carry the not-yet-crossed sub-density from look k-1 to look k's continuation region:
    f_k(y) = sum_x mass(x) phi((y - x) / sd_k) / sd_k, in row blocks to bound memory."""
    new, weights = _simpson_grid(t, c, min(steps[k], steps[k + 1]), two_sided)
    density = np.empty_like(new)
    norm = steps[k] * math.sqrt(2 * math.pi)
    for start in range(0, len(new), _ROWS_PER_BLOCK):
        z = (new[start : start + _ROWS_PER_BLOCK, None] - grid[None, :]) / steps[k]
        density[start : start + len(z)] = np.exp(-0.5 * z * z) @ mass / norm
    return new, weights * density


def _simpson_grid(t: float, c: float, sd: float, two_sided: bool) -> tuple[np.ndarray, np.ndarray]:
    """Points and Simpson weights over look k's continuation region in S units: (-c, c) sqrt(t)
    two-sided, (-inf, c) sqrt(t) one-sided, cut where the normal has no mass left."""
    top = min(c, _Z_LIMIT) * math.sqrt(t)
    bottom = -top if two_sided else -_Z_LIMIT * math.sqrt(t)
    intervals = math.ceil((top - bottom) * _POINTS_PER_SD / sd / 2) * 2
    intervals = max(2, min(intervals, _MAX_POINTS - 1))
    grid = np.linspace(bottom, top, intervals + 1)
    weights = np.ones(intervals + 1)
    weights[1:-1:2], weights[2:-1:2] = 4.0, 2.0
    return grid, weights * (grid[1] - grid[0]) / 3


def _crossing(grid: np.ndarray, mass: np.ndarray, sd: float, bound: float, two_sided: bool):
    """P(no crossing before look k, S_k beyond the bound at look k)."""
    upper = special.ndtr((grid - bound) / sd)
    if two_sided:
        upper = upper + special.ndtr((-bound - grid) / sd)
    return float(mass @ upper)


def _bound(
    grid: np.ndarray, mass: np.ndarray, sd: float, scale: float, share: float, two_sided: bool
) -> float:
    """The boundary c (in Z units; S = Z x scale) where the crossing probability, decreasing
    in c, meets the look's share of alpha."""

    def excess(c: float) -> float:
        return _crossing(grid, mass, sd, c * scale, two_sided) - share

    low, high = (0.0 if two_sided else -_Z_LIMIT), _Z_LIMIT
    if excess(high) >= 0:  # a share too small to see on the grid: practically never cross
        return high
    if excess(low) <= 0:  # a share as large as what is left: always cross
        return low
    return float(optimize.brentq(excess, low, high, xtol=1e-12, rtol=1e-12))
