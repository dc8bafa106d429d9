"""deepsig's ASO, with its empirical quantile function evaluated for a whole array at once.

deepsig wraps a per-point Python quantile function in `np.vectorize`, and every bootstrap
iteration calls it for ~1,000 integration points and every sampled score: 2.4 million Python
calls for the three comparisons of a two-arm study, ~20 s of its report on a 2-core CPU.
`quantile_function` below computes exactly what deepsig's does (the sorted scores at
ceil(n p) - 1, clipped to the sample), with the same float operations, as one array expression,
and is put in deepsig's place only for the duration of a call. Every random draw is still
deepsig's own, so eps_min is the same number to the last bit (tests/study/stats/test_stats.py
checks).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import multiprocessing
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from study.stats._units import of_seeds, pair_scores

# deepsig's __init__ re-exports the function as `deepsig.aso`, hiding the module of that name;
# the module is where deepsig's own calls look `get_quantile_function` up. deepsig imports torch
# (1-2 s), so it is imported at the first comparison, not when a report module is imported.
_MODULE_NAME = "deepsig.aso"
_REPLACED = "get_quantile_function"
# a worker process takes seconds to start (deepsig imports torch): worth it only for a report
# with hundreds of comparisons, such as a grid compared all-pairs (docs/scale.md)
JOBS_PER_WORKER = 50


def quantile_function(scores: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The empirical quantile function of `scores`, taking an array of probabilities."""
    ordered = np.sort(scores)
    n = len(ordered)

    def quantile(p: np.ndarray) -> np.ndarray:
        index = np.ceil(n * np.asarray(p, dtype=float)).astype(np.int64) - 1
        return ordered.take(index, mode="clip")  # clipped to [0, n - 1], as deepsig clips

    return quantile


@contextlib.contextmanager
def _array_quantiles() -> Iterator[None]:
    module = importlib.import_module(_MODULE_NAME)
    original = getattr(module, _REPLACED, None)
    if original is None:  # a deepsig that no longer has it: run it as it is, only slower
        yield
        return
    setattr(module, _REPLACED, quantile_function)
    try:
        yield
    finally:
        setattr(module, _REPLACED, original)


def aso(scores_a: np.ndarray, scores_b: np.ndarray, **kwargs) -> float:
    """`deepsig.aso` with the same arguments and result, about 40x faster. Sequential only:
    with num_jobs > 1 deepsig's workers would import the module afresh, unreplaced."""
    from deepsig import aso as deepsig_aso

    with _array_quantiles():
        return deepsig_aso(scores_a, scores_b, **kwargs)


Job = tuple[np.ndarray, np.ndarray, float, int, "Mapping[str, Any] | None"]


def aso_both_ways(
    a: np.ndarray, b: np.ndarray, confidence: float, seed: int, extra: Mapping[str, Any] | None
) -> tuple[float, float]:
    """deepsig's ASO eps_min for 'A better than B' and for 'B better than A' (higher = better
    after the caller's sign flip), at an explicit Bonferroni confidence level 1 - alpha/k
    (deepsig's own `num_comparisons` adjusts it as conf + (1 - conf)/k instead).
    Identical score lists have no order: 1.0 both ways."""
    if np.array_equal(np.sort(a), np.sort(b)):
        return 1.0, 1.0
    kwargs = {"seed": seed, "show_progress": False, "confidence_level": confidence}
    kwargs.update(extra or {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(aso(a, b, **kwargs)), float(aso(b, a, **kwargs))


def _job(job: Job) -> tuple[float, float]:
    return aso_both_ways(*job)


def aso_both_ways_many(
    jobs: Sequence[Job], workers: int | None = None
) -> list[tuple[float, float]]:
    """`aso_both_ways` of every job, in order, spread over the machine's cores when there are
    enough of them to pay for starting the workers. Each call is seeded by its job alone, so
    the numbers are the same as one after another. Workers are spawned, not forked: the
    driver that builds a study's report holds Ray's threads."""
    if workers is None:
        workers = min(len(os.sched_getaffinity(0)), len(jobs) // JOBS_PER_WORKER)
    if workers < 2:
        return [_job(job) for job in jobs]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        return list(pool.map(_job, jobs, chunksize=max(1, len(jobs) // (4 * workers))))


def with_family_aso(family: list, scores: Mapping, confidence: float, aso_kwargs: Any) -> list:
    """The family's ASO, computed together (over the cores, when there are many) on the seeds
    each comparison used, as `compare` computes it for one comparison."""
    tested = [c for c in family if c.n >= 2]
    jobs = []
    for c in tested:
        sign = 1.0 if c.higher_is_better else -1.0
        a, b = (of_seeds(scores[arm][c.metric], c.seeds) for arm in (c.arm_a, c.arm_b))
        _, xa, xb, _ = pair_scores(a, b)
        jobs.append((sign * xa, sign * xb, confidence, 0, aso_kwargs))
    eps = dict(zip(map(id, tested), aso_both_ways_many(jobs), strict=True))
    return [
        dataclasses.replace(c, eps_min=eps[id(c)][0], eps_min_reverse=eps[id(c)][1],
                            aso_confidence=confidence) if id(c) in eps else c
        for c in family
    ]  # fmt: skip
