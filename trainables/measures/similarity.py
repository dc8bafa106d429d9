"""How alike two layers' views of the same tokens are, in NumPy and SciPy alone.

Shared by `trainables.measures.dynamics` (a fine-tuned encoder against its pretrained self, during a
trial) and the report (fine-tuned encoders against each other, from their fingerprints), so
both give the same numbers for the same inputs. It imports no torch: the report, which
must not, imports it.

Each side of a comparison is prepared once (`prepare`): centred, scaled, and reduced to its
top singular directions. A report compares every fingerprint with several others, and the
singular value decomposition is the expensive part, so it is done once per side; a pair then
costs one cross product of the two sides (`compare_prepared`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import rel_entr

SVCCA_VARIANCE = 0.99
LN2 = math.log(2)


@dataclass(frozen=True)
class Prepared:
    """One token-by-feature matrix ready to be compared: `raw` as given (equal inputs are
    recognised exactly), `centred` (column-centred, unit Frobenius norm; None when no feature
    varies), `gram_norm` = ||centred^T centred||_F (the CKA denominator), and `whitening`
    (features x k: maps centred rows onto the orthonormal basis of the fewest singular
    directions holding `variance` of the variance: the SV step of SVCCA)."""

    raw: np.ndarray
    centred: np.ndarray | None
    gram_norm: float
    whitening: np.ndarray | None


def _centred(x: np.ndarray) -> np.ndarray | None:
    """Column-centred and scaled to unit Frobenius norm (both similarities ignore scale, and
    this keeps Gram products far from overflow); None when no feature varies."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] < 2 or not np.ptp(x, axis=0).any():
        return None
    x = x - x.mean(axis=0)
    return x / np.linalg.norm(x)


def prepare(x: np.ndarray, variance: float = SVCCA_VARIANCE) -> Prepared:
    """`x` (tokens x features, any float dtype) prepared for `compare_prepared`.

    The singular directions come from the eigendecomposition of the features' Gram matrix
    (features x features, needed for CKA anyway) rather than an SVD of the tokens: the
    same directions (x = u s v^T gives x^T x = v s^2 v^T), several times faster for the
    ~2,000 tokens x 384 features of a fingerprint layer. Squaring costs precision only in
    directions below 1e-8 of the largest, far below the 1% of the variance SVCCA drops."""
    centred = _centred(x)
    if centred is None:
        return Prepared(np.asarray(x), None, math.nan, None)
    gram = centred.T @ centred
    eigenvalues, vectors = np.linalg.eigh(gram)  # ascending
    eigenvalues, vectors = np.clip(eigenvalues[::-1], 0.0, None), vectors[:, ::-1]
    energy = np.cumsum(eigenvalues) / np.sum(eigenvalues)
    k = min(int(np.searchsorted(energy, variance)) + 1, len(eigenvalues))
    k = min(k, int(np.sum(eigenvalues > eigenvalues[0] * np.finfo(np.float64).eps)))
    # centred @ v_k / s_k is the orthonormal basis u_k of those directions (u = x v / s)
    whitening = vectors[:, :k] / np.sqrt(eigenvalues[:k])
    return Prepared(np.asarray(x), centred, float(np.linalg.norm(gram)), whitening)


def compare_prepared(a: Prepared, b: Prepared) -> tuple[float, float]:
    """(linear CKA, SVCCA distance) of two prepared sides with the same rows.

    Linear CKA (Kornblith et al. 2019): invariant to rotations and isotropic scaling of
    either side, 1 = the same features. SVCCA distance (Raghu et al. 2017): 1 - mean canonical
    correlation of the two sides' top singular directions, 0 = the same subspace. The
    canonical correlations of two orthonormal bases u_a, u_b are the singular values of
    u_a^T u_b = w_a^T (x_a^T x_b) w_b, so both come from one cross product. Equal inputs give
    exactly 1 and 0 (rounding would otherwise make an unchanged layer look moved by 1e-16);
    NaN where a side has no variance, as both are undefined there."""
    if a.centred is None or b.centred is None:
        return math.nan, math.nan
    if a.raw.shape == b.raw.shape and np.array_equal(a.raw, b.raw):
        return 1.0, 0.0
    cross = a.centred.T @ b.centred
    cka = float(np.linalg.norm(cross) ** 2 / (a.gram_norm * b.gram_norm))
    correlations = np.linalg.svd(a.whitening.T @ cross @ b.whitening, compute_uv=False)
    return min(cka, 1.0), float(np.clip(1.0 - correlations.mean(), 0.0, 1.0))


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA of two token-by-feature matrices with the same rows (see `compare_prepared`)."""
    return compare_prepared(prepare(x), prepare(y))[0]


def svcca_distance(x: np.ndarray, y: np.ndarray, variance: float = SVCCA_VARIANCE) -> float:
    """SVCCA distance of two token-by-feature matrices with the same rows (see
    `compare_prepared`)."""
    return compare_prepared(prepare(x, variance), prepare(y, variance))[1]


# --- attention ----------------------------------------------------------------------------


def js_divergence(p: np.ndarray, q: np.ndarray, axis: int = -1) -> np.ndarray:
    """Jensen-Shannon divergence in nats along `axis` of two arrays of distributions:
    symmetric and bounded by ln 2, so attention that became (near) disjoint stays comparable.
    The NumPy twin of `trainables.measures.dynamics.js_divergence` (tested against it)."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    m = (p + q) / 2
    # rel_entr gives 0 where a probability is 0, the limit of p log p, instead of NaN
    js = (rel_entr(p, m).sum(axis) + rel_entr(q, m).sum(axis)) / 2
    return np.clip(js, 0.0, LN2)


def _rows_normalised(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each row (a segment of the last axis beginning at `starts`) divided by its sum."""
    values = np.asarray(values, np.float64)
    sums = np.add.reduceat(values, starts, axis=-1)
    widths = np.diff(np.append(starts, values.shape[-1]))
    tiny = np.finfo(np.float64).tiny
    return values / np.repeat(np.maximum(sums, tiny), widths, axis=-1)


def segmented_js(p: np.ndarray, q: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """JS divergence of every row of two flat arrays of rows of different lengths: the last
    axis holds the rows one after the other, row r beginning at `starts[r]`. Each row is
    normalised first (stored probabilities are rounded, and padding keys were cut off).
    Returns the leading axes x rows."""
    p, q = _rows_normalised(p, starts), _rows_normalised(q, starts)
    m = (p + q) / 2
    terms = rel_entr(p, m) + rel_entr(q, m)
    return np.clip(np.add.reduceat(terms, starts, axis=-1) / 2, 0.0, LN2)
