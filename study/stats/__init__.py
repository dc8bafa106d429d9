"""Statistics of paired seed comparisons under a declared analysis.

The public names below are what the report and the driver use; each job sits in its own
module: `_compare` (one comparison's figures and the family of a study, composed from
`_units`: the paired units, `_intervals`: t and bootstrap intervals at the test's level,
`_rank`: Wilcoxon and its smallest p, `_effects`: d_z and the win probability,
`_multiplicity`: Holm, also over every test of the primary comparisons at once, `_verdicts`:
the verdicts at one look or sequentially), `_record` (the comparison record and its wording),
`_pairs` (which arms are compared), `_seed_pairs` (a mean over pairs of seeds and its
jackknife interval), `sequential` (the decision rule shared by the driver and the report,
with `_spending`: alpha spending and the looks' levels, and `_power`: power at every n),
`_aso` (deepsig's almost stochastic order, vectorised).
"""

from __future__ import annotations

from study.stats import sequential
from study.stats._compare import ASO_TAU, compare, compare_arms
from study.stats._effects import cohens_dz
from study.stats._intervals import (
    BOOTSTRAP_MIN_SEEDS,
    POWER,
    bootstrap_ci,
    t_interval,
    with_level,
)
from study.stats._multiplicity import ALPHA, holm
from study.stats._pairs import DIRECTIONS, arm_pairs, direction
from study.stats._rank import wilcoxon_min_p
from study.stats._record import EXPLORATORY, Comparison, unit_text
from study.stats._seed_pairs import MIN_SEEDS as PAIR_MIN_SEEDS
from study.stats._seed_pairs import seed_pair_interval
from study.stats._units import pair_scores
from study.stats._verdicts import sequential_decision

__all__ = [
    "ALPHA", "ASO_TAU", "BOOTSTRAP_MIN_SEEDS", "DIRECTIONS", "EXPLORATORY", "PAIR_MIN_SEEDS",
    "POWER",
    "Comparison", "arm_pairs", "bootstrap_ci", "cohens_dz", "compare", "compare_arms",
    "direction", "holm", "pair_scores", "seed_pair_interval", "sequential",
    "sequential_decision", "t_interval", "unit_text", "wilcoxon_min_p", "with_level",
]  # fmt: skip
