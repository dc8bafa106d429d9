"""Seeds and phases: the seed pool, the explore phase (samples, seeds, ASHA), the confirm phase
(what it selects, its held-out seeds, its rounds, its data seeds) and the declared analysis.

The seeds that choose a configuration (explore) must not also estimate it (confirm) unless the
file says so, and a confirm phase that runs in rounds plans its looks here, before any data.
"""

from __future__ import annotations

from typing import Any

from study.analysis import SPENDING, Analysis
from study.spec.distributions import Distribution
from study.spec.document import Doc, FieldPath, count, is_int, show, suggest
from study.spec.factors import Shape, check_value
from study.spec.limits import MAX_TRIALS
from study.spec.samplers import check_sampler
from study.spec.validated import (
    CHECKPOINT_EVERY_S_DEFAULT,
    AshaSettings,
    ConfirmPhase,
    ExplorePhase,
)
from trainables.settings import TrialConfig
from trainables.yaml_reading import bool_word

# the trial's own default, for a file that does not fix `warmup_ratio`
WARMUP_RATIO_DEFAULT = TrialConfig.__dataclass_fields__["warmup_ratio"].default

# The keys of each part, with what they take and are for (docs/study-keys.md).
PHASES_KEYS = {
    "explore": "`{samples, seeds, asha}`: sample the `search` factors in each arm",
    "confirm": "`{select, seeds, ...}`: run the selected configuration of each arm on "
    "held-out seeds; its trials alone decide the verdicts",
}
EXPLORE_KEYS = {
    "samples": "an integer >= 1: search points Optuna draws per arm",
    "seeds": "a count or a list of seeds (default: the rest of the pool): the seeds each "
    "sample trains on",
    "asha": "`{grace_period, reduction_factor}`: prune samples early with ASHA; absent: none",
    "sampler": "`tpe` (default), `random` or `gp`: the Optuna sampler each arm's search uses",
    "sampler_seed": "an integer >= 0 (default 0): seeds the samplers, arm i's with this + i; "
    "another value draws other samples (independent repetitions of a search)",
    "start_from": "a list of samples of the search factors (e.g. [{lr: 1.78e-4}], the optimum "
    "of an earlier study or of a grid): each arm's first samples, queued in Optuna before it "
    "draws; they count towards `samples`",
}
# Ray's ASHA is asynchronous: the first sample at a rung is promoted with nothing to compare it
# with. With 3 samples per arm it pruned none of 40 first samples in ner_depth's search, and a
# first rung just after the warm-up rewarded the faster starter (docs/history.md). So a first
# rung inside the warm-up is refused, and a study that prunes with fewer samples per arm than
# this is told so by its dry run and its report's threats (the shipped designs prune only
# with more: ner_depth's cluster profile).
MIN_ASHA_SAMPLES = 6
ASHA_KEYS = {
    "grace_period": "a number > 0: epochs before the first pruning decision, past the lr warm-up",
    "reduction_factor": "a number > 1: the fraction kept at each rung is 1/this",
}
CONFIRM_KEYS = {
    "select": "`best` (each arm's best explore sample, the default with explore), `model` (each "
    "arm's lr at the peak of a curve fitted through every explore result, log lr, curvature "
    "shared by the arms) or a list of "
    "samples of the search factors that every arm runs",
    "seeds": "a count or a list of seeds, disjoint from explore's: the held-out seeds (with "
    "`max_seeds`: the first round's count)",
    "max_seeds": "an integer >= seeds: run in rounds, adding seeds until each comparison is "
    "decided or this many ran (docs/statistics.md)",
    "step": "an integer >= 1 (default: max_seeds - seeds): seeds added per round",
    "reuse_explore_seeds": "true or false (default): allow confirm seeds that explore also "
    "ran; the chosen sample's explore trial then counts as its confirm trial",
    "data_seeds": "a count or a list: data subsets and orders per seed, each arm's score at a "
    "seed being their mean",
    "checkpoint_every_s": "a number of seconds >= 0 (default 60): the least time between a "
    "confirm trial's checkpoints (0: one at every evaluation). Confirm trials are never paused, "
    "so a checkpoint only bounds what a crash or Ctrl-C retrains; explore's trials keep the "
    "same cadence without ASHA (the default's in a study without confirm), and under ASHA "
    "checkpoint at every evaluation, where a paused seed resumes",
}
ANALYSIS_KEYS = {
    "primary": "a metric every trial reports at its end (default `test_f1`): the one whose "
    "comparisons get verdicts",
    "margin": "a number >= 0 in the primary metric's units (default 0.01): within it two "
    "arms count as equally good",
    "alpha": "a level in (0, 0.5) (default 0.05): the family-wise error rate",
    "spending": "`obrien_fleming` (default) or `pocock`: the alpha-spending rule of confirm rounds",
    "plateau": "a gain > 0 in the study metric's units (default 0.005): a trial whose "
    "smoothed curve (the least-squares line through its last third of evaluations) rose by "
    "less over that third counts as converged, whatever stopped it (until_plateau included)",
    "ni_alpha": "a one-sided level in (0, 0.5) (default: alpha/2): the non-inferiority test's",
    "margins": "a mapping of metric: margin: margins for metrics outside the primary's units",
}


def study_seeds(doc: Doc) -> tuple[int, ...] | int:
    """A count n (each phase takes n fresh seeds unless it says otherwise; seeds are numbered
    0, 1, ... across phases) or a list (the pool the phases take their seeds from, in order)."""
    value = doc.data.get("seeds")
    allowed = "a count n (seeds per phase) or a list of different integers >= 0"
    if value is None:
        raise doc.missing(("seeds",), allowed)
    if is_int(value):
        return doc.integer(("seeds",), value, 1, allowed)
    if not isinstance(value, list) or not value:
        raise doc.bad(("seeds",), value, allowed)
    for index, seed in enumerate(value):
        doc.integer(("seeds", index), seed, 0, "a seed: an integer >= 0")
    doc.distinct(("seeds",), value, value)
    return tuple(value)


def _phase_seeds(
    doc: Doc, path: FieldPath, value: Any, pool: tuple[int, ...] | int, offset: int
) -> tuple[int, ...]:
    """A count takes the next n seeds of the pool after `offset` (the seeds earlier phases
    hold), so phases never share a seed by default; a list is taken as given."""
    if value is None:
        value = pool if is_int(pool) else len(pool) - offset
        if value < 1:
            raise doc.missing(path, f"the pool `seeds` has no seed left after {offset}")
    if is_int(value):
        doc.integer(path, value, 1, "a count >= 1 or a list of seeds")
        if value > MAX_TRIALS:  # refused before its seeds are listed
            raise doc.bad(path, value, f"a count of at most {MAX_TRIALS:,}, the most trials "
                          "a study may plan")  # fmt: skip
        if is_int(pool):
            return tuple(range(offset, offset + value))
        if offset + value > len(pool):
            left = count(len(pool) - offset, "seed")
            raise doc.bad(path, value, f"the pool `seeds` {show(pool)} has {left} left "
                          f"after the {offset} that earlier phases take; list more seeds, or "
                          "give `seeds` as a count")  # fmt: skip
        return pool[offset : offset + value]
    if not isinstance(value, list) or not value:
        raise doc.bad(path, value, "a count >= 1 or a non-empty list of seeds")
    for index, seed in enumerate(value):
        if is_int(pool):
            doc.integer((*path, index), seed, 0, "a seed: an integer >= 0")
        elif not is_int(seed) or seed not in pool:
            raise doc.bad((*path, index), seed, f"one of the study's seeds {show(pool)}")
    doc.distinct(path, value, value)
    return tuple(value)


def study_phases(
    doc: Doc, seeds: tuple[int, ...] | int, search: dict, shape: Shape
) -> tuple[ExplorePhase | None, ConfirmPhase | None]:
    path = ("phases",)
    phases = doc.data.get("phases")
    if phases is None:
        raise doc.missing(path, "an explore phase, a confirm phase, or both")
    doc.mapping(path, phases, "a mapping with explore and/or confirm")
    doc.check_keys(path, phases, tuple(PHASES_KEYS))
    explore = _explore(doc, phases.get("explore"), seeds, search, shape)
    confirm = _confirm(doc, phases.get("confirm"), seeds, search, explore, shape)
    if explore is None and confirm is None:
        raise doc.fail(path, "no phase: give explore, confirm, or both")
    return explore, confirm


def _explore(
    doc: Doc, value: Any, seeds: tuple[int, ...] | int, search: dict, shape: Shape
) -> ExplorePhase | None:
    if value is None:
        return None
    path = ("phases", "explore")
    doc.mapping(path, value, "a mapping with samples, seeds, asha, sampler, sampler_seed and "
                "start_from")  # fmt: skip
    doc.check_keys(path, value, tuple(EXPLORE_KEYS))
    if not search:
        raise doc.fail(path, "the explore phase samples the `search` factors, but `search` "
                       "is empty; add search factors or drop the explore phase")  # fmt: skip
    samples = value.get("samples")
    if samples is None:
        raise doc.missing((*path, "samples"), "the number of Optuna samples per arm (>= 1)")
    doc.integer((*path, "samples"), samples, 1, "Optuna samples per arm, >= 1")
    distinct = _distinct_samples(search)
    if distinct is not None and samples > distinct:
        raise doc.bad((*path, "samples"), samples, f"at most {distinct}: the searched factors "
                      f"have {distinct} distinct values, and a sample drawn twice would only "
                      "repeat trials")  # fmt: skip
    phase_seeds = _phase_seeds(doc, (*path, "seeds"), value.get("seeds"), seeds, 0)
    sampler = check_sampler(doc, (*path, "sampler"), value.get("sampler"))
    seed_path, sampler_seed = (*path, "sampler_seed"), value.get("sampler_seed", 0)
    doc.integer(seed_path, sampler_seed, 0, "the samplers' seed, an integer >= 0")
    asha = _asha(doc, value.get("asha"))
    start = _start_from(doc, (*path, "start_from"), value.get("start_from"), search, samples, shape)
    return ExplorePhase(samples, phase_seeds, asha, sampler, sampler_seed, start)


def _start_from(
    doc: Doc, path: FieldPath, value: Any, search: dict, samples: int, shape: Shape
) -> tuple[dict, ...]:
    """Known good samples each arm's search starts from, checked like confirm's samples."""
    if value is None:
        return ()
    if not isinstance(value, list) or not value:
        raise doc.bad(path, value, "a non-empty list of samples of the search factors, e.g. "
                      "[{lr: 1.78e-4}]")  # fmt: skip
    if len(value) > samples:
        raise doc.bad(path, value, f"at most `samples` ({samples}) samples: they are the "
                      "first of them")  # fmt: skip
    start = [_sample(doc, (*path, i), item, search, shape) for i, item in enumerate(value)]
    doc.distinct(path, value, start)
    return tuple(start)


def _distinct_samples(search: dict[str, Distribution]) -> int | None:
    """How many different samples a space of finite factors holds; None when a factor is
    real-valued (no limit)."""
    total = 1
    for dist in search.values():
        points = dist.points()
        if points is None:
            return None
        total *= len(points)
    return total


def _asha(doc: Doc, value: Any) -> AshaSettings | None:
    if value is None:
        return None
    path = ("phases", "explore", "asha")
    doc.mapping(path, value, "a mapping {grace_period: 1, reduction_factor: 2}")
    doc.check_keys(path, value, tuple(ASHA_KEYS))
    settings = {
        "grace_period": (lambda x: x > 0, "epochs before the first pruning decision, > 0"),
        "reduction_factor": (lambda x: x > 1, "the fraction kept at each rung is 1/this; > 1"),
    }
    numbers = {}
    for key, (ok, allowed) in settings.items():
        if value.get(key) is None:
            raise doc.missing((*path, key), allowed)
        numbers[key] = float(doc.number((*path, key), value[key], ok, allowed))
    return AshaSettings(**numbers)


def _confirm(
    doc: Doc,
    value: Any,
    seeds: tuple[int, ...] | int,
    search: dict,
    explore: ExplorePhase | None,
    shape: Shape,
) -> ConfirmPhase | None:
    if value is None:
        return None
    path = ("phases", "confirm")
    doc.mapping(path, value, "a mapping with select and seeds")
    doc.check_keys(path, value, tuple(CONFIRM_KEYS))
    select = _select(doc, value.get("select"), search, explore is not None, shape)
    written = value.get("reuse_explore_seeds", False)
    reuse = bool_word(written)
    if reuse is None:
        raise doc.bad((*path, "reuse_explore_seeds"), written, "true or false (or yes/no)")
    held_by_explore = len(explore.seeds) if explore and not reuse else 0
    first, step, total = _rounds(doc, value, seeds)
    wanted = value.get("seeds") if total is None else total
    confirm_seeds = _phase_seeds(doc, (*path, "seeds"), wanted, seeds, held_by_explore)
    if explore and not reuse:
        _check_disjoint(doc, (*path, "seeds"), confirm_seeds, explore.seeds)
    data_seeds = value.get("data_seeds")
    if data_seeds is not None:
        data_seeds = _phase_seeds(doc, (*path, "data_seeds"), data_seeds, 1, 0)
    every = value.get("checkpoint_every_s", CHECKPOINT_EVERY_S_DEFAULT)
    every = float(doc.number((*path, "checkpoint_every_s"), every, lambda s: s >= 0,
                             "a number of seconds >= 0"))  # fmt: skip
    return ConfirmPhase(select, confirm_seeds, first, step, reuse, data_seeds, every)


def _rounds(doc: Doc, value: dict, pool: tuple[int, ...] | int) -> tuple[int, int, int | None]:
    """`seeds: 5, max_seeds: 20, step: 5`: 5 seeds, then 5 more per round up to 20 while a
    comparison is undecided. Returns (first, step, total), total None without rounds."""
    path = ("phases", "confirm")
    max_seeds, step = value.get("max_seeds"), value.get("step")
    if max_seeds is None and step is None:
        return 0, 0, None
    first = value.get("seeds", pool if is_int(pool) else None)
    if not is_int(first):
        raise doc.bad((*path, "seeds"), first, "a count of seeds for the first round when "
                      "max_seeds and step are given")  # fmt: skip
    if max_seeds is None:
        raise doc.missing((*path, "max_seeds"), "the most seeds the rounds may reach")
    doc.integer((*path, "max_seeds"), max_seeds, first, f"a count >= seeds ({first})")
    step = max_seeds - first if step is None else step
    if max_seeds > first:
        doc.integer((*path, "step"), step, 1, "seeds added per round, >= 1")
    return first, (step if max_seeds > first else 0), max_seeds


def _check_disjoint(
    doc: Doc, path: FieldPath, confirm: tuple[int, ...], explore: tuple[int, ...]
) -> None:
    shared = sorted(set(confirm) & set(explore))
    if shared:
        raise doc.bad(path, list(confirm), f"seeds {show(shared)} also ran in explore, where "
                      "they chose the configuration; a seed that chooses must not also "
                      "estimate (give other seeds, or set confirm.reuse_explore_seeds: "
                      "true)")  # fmt: skip


def _select(
    doc: Doc, value: Any, search: dict, has_explore: bool, shape: Shape
) -> str | tuple[dict, ...]:
    """'best' (of each arm's explore samples) or the samples every arm runs. Without an explore
    phase and without search factors, each arm runs once: a single empty sample."""
    path = ("phases", "confirm", "select")
    if value is None:
        if has_explore:
            return "best"
        if not search:
            return ({},)
        raise doc.missing(path, "with no explore phase, list the samples to run")
    if value == "model":
        if not has_explore:
            why = "'model' fits a curve through the explore results, but there is no explore phase"
            raise doc.bad(path, value, why + "; add phases.explore or list the samples")
        kinds = [getattr(dist, "kind", None) for dist in search.values()]
        if kinds != ["loguniform"]:
            why = (f"'model' fits a curve in the log of one loguniform search factor (the lr); "
                   f"this study searches {', '.join(search) or 'nothing'}; use 'best'")  # fmt: skip
            raise doc.bad(path, value, why)
        return "model"
    if value == "best":
        if not has_explore:
            why = "'best' picks each arm's best explore sample, but there is no explore phase"
            raise doc.bad(path, value, why + "; add phases.explore or list the samples")
        return "best"
    if not isinstance(value, list) or not value:
        raise doc.bad(path, value, "'best', 'model' or a non-empty list of samples of the search "
                      "factors")  # fmt: skip
    samples = [_sample(doc, (*path, i), item, search, shape) for i, item in enumerate(value)]
    doc.distinct(path, value, samples)
    return tuple(samples)


def _sample(doc: Doc, path: FieldPath, item: Any, search: dict, shape: Shape) -> dict:
    names = ", ".join(search) or "(none)"
    if not isinstance(item, dict):
        raise doc.bad(path, item, f"a mapping of the search factors ({names})")
    if set(item) != set(search):
        missing = ", ".join(name for name in search if name not in item) or "none"
        extra = ", ".join(str(name) for name in item if name not in search) or "none"
        raise doc.bad(path, item, f"keys must be exactly the search factors ({names}); "
                      f"missing: {missing}; not searched: {extra}")  # fmt: skip
    return {name: check_value(doc, (*path, name), name, item[name], shape) for name in search}


def declared_analysis(doc: Doc, confirm: ConfirmPhase | None) -> Analysis:
    """`analysis: {primary, margin, alpha, spending, plateau, ni_alpha, margins}`, declared
    before the data are seen."""
    path = ("analysis",)
    value = doc.data.get("analysis")
    value = {} if value is None else value
    doc.mapping(path, value, "a mapping {primary: test_f1, margin: 0.01, alpha: 0.05}")
    doc.check_keys(path, value, tuple(ANALYSIS_KEYS))
    primary = value.get("primary", Analysis.primary)
    known = _primary_metrics(doc)
    if primary not in known:
        raise doc.bad((*path, "primary"), primary, f"one of {', '.join(known)}"
                      f"{suggest(primary, tuple(known))}")  # fmt: skip
    margin = value.get("margin", Analysis.margin)
    margin = doc.number((*path, "margin"), margin, lambda x: x >= 0,
                        "a margin >= 0 in the primary metric's units")  # fmt: skip
    alpha = doc.number((*path, "alpha"), value.get("alpha", Analysis.alpha),
                       lambda x: 0 < x < 0.5, "a level in (0, 0.5)")  # fmt: skip
    spending = value.get("spending", Analysis.spending)
    if spending not in SPENDING:
        raise doc.bad((*path, "spending"), spending, f"one of {', '.join(SPENDING)}")
    plateau = doc.number((*path, "plateau"), value.get("plateau", Analysis.plateau),
                         lambda x: x > 0, "a gain > 0 in the study metric's units")  # fmt: skip
    ni_alpha = value.get("ni_alpha")
    if ni_alpha is not None:
        ni_alpha = float(doc.number((*path, "ni_alpha"), ni_alpha, lambda x: 0 < x < 0.5,
                                    "a one-sided level in (0, 0.5)"))  # fmt: skip
    looks = confirm.looks if confirm else ()
    seed_order = confirm.seeds if confirm else ()
    data_seeds = len(confirm.data_seeds) if confirm and confirm.data_seeds else 1
    return Analysis(
        primary, float(margin), float(alpha), spending, looks, seed_order, data_seeds,
        plateau=float(plateau), ni_alpha=ni_alpha, margins=_margins(doc, value, known),
    )  # fmt: skip


def _margins(doc: Doc, value: dict, known: list[str]) -> tuple[tuple[str, float], ...]:
    """`margins: {metric: margin}`: metrics outside the primary's units get their own."""
    path = ("analysis", "margins")
    margins = value.get("margins")
    if margins is None:
        return ()
    doc.mapping(path, margins, "a mapping {metric: margin in that metric's units}")
    checked = []
    for metric, margin in margins.items():
        if metric not in known:
            raise doc.bad((*path, metric), metric, f"one of {', '.join(known)}"
                          f"{suggest(str(metric), tuple(known))}")  # fmt: skip
        margin = doc.number((*path, metric), margin, lambda x: x >= 0,
                            f"a margin >= 0 in {metric}'s units")  # fmt: skip
        checked.append((metric, float(margin)))
    return tuple(checked)


def _primary_metrics(doc: Doc) -> list[str]:
    """Metrics every trial reports at its end: the comparable ones."""
    extra = (doc.data.get("data") or {}).get("extra") or {}
    names = ["test_f1", "dev_f1", "curve_area", "steps_to_95", "dev_loss", "test_loss"]
    names += [f"{name}_f1" for name in extra if isinstance(extra, dict)]
    metric = (doc.data.get("metric") or {}).get("name")
    return names + ([metric] if isinstance(metric, str) and metric not in names else [])


def check_first_rung(doc: Doc, explore: ExplorePhase | None, fixed: dict[str, Any]) -> None:
    """ASHA's first rung must lie past the lr warm-up, or it judges samples by how fast they
    start rather than where they go. Checked where the file fixes the epochs (`epochs`, or
    `until_plateau`'s `max_epochs`); a budget in steps leaves the epochs to the data."""
    if explore is None or explore.asha is None:
        return
    budget = fixed.get("budget") or {}
    plateau = budget.get("until_plateau") if isinstance(budget, dict) else None
    epochs = plateau.get("max_epochs") if isinstance(plateau, dict) else fixed.get("epochs")
    if not isinstance(epochs, int | float):
        return
    ratio = fixed.get("warmup_ratio", WARMUP_RATIO_DEFAULT)
    warm = float(ratio) * float(epochs)
    grace = explore.asha.grace_period
    if grace <= warm:
        raise doc.bad(("phases", "explore", "asha", "grace_period"), grace, f"more than "
                      f"{warm:g} epochs: the lr warms up over the first {warm:g} of {epochs:g} "
                      "epochs, and a rung inside it rewards the faster starter")  # fmt: skip
