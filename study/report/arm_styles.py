"""How each arm looks in every figure of a report: its name, colour and marker, and the panel
it is drawn in when a figure has more arms than one panel can show apart.

All of it follows from the study's arm order (`StudyRecord.arms`, plan order) and its grid,
never from the order of some figure's own table, so an arm has one look in every figure of a
report (a figure that coloured its arms in the order its table listed them disagreed with
the others). Every report figure that draws arms takes their look from `arm_styles`.

Up to `MAX_LINES` arms share one panel. Beyond, line figures become small multiples: the last
grid factors (those whose values multiply to at most `MAX_LINES`) vary inside a panel and the
first ones choose the panel, with the next factor split into runs of values when that leaves
more than `MAX_PANELS` panels (or when the last factor alone has more than `MAX_LINES` values).
An arm's colour and marker are its place among the lines of its panel, so no two arms of a
panel share them, and in an unsplit grid one colour means the same values of the factors
inside the panels in every panel. Where even that needs more than `MAX_PANELS` panels (100
arms), one panel shows the `MAX_LINES` best arms by the study's metric in colour and the
others in grey (`OTHERS`), unnamed: a figure of dozens of panels is neither read nor quick to
draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import matplotlib
import pandas as pd

from study.names import factor_value
from study.tracking.reading import StudyRecord

MAX_LINES = 8  # arms drawn in one panel at most
MAX_PANELS = 6  # past this many panels, runs of the next factor's values share a panel
# tab10 without its grey, which the figures keep for what belongs to no arm (the other seeds'
# lines, the pruned trials' legend); neither these nor the markers are black, kept for medians
PALETTE = tuple(matplotlib.colormaps["tab10"](i) for i in (0, 1, 2, 3, 4, 5, 6, 8))
MARKERS = "osD^v<>p"
OTHERS = (0.72, 0.72, 0.72, 1.0)  # the arms past the best few, when there are too many to show


@dataclass(frozen=True)
class ArmStyle:
    """One arm's look: `label` is its name in every figure (the factors that vary between the
    study's arms, each value spelt as in the arm id), `short` its name inside its panel (the
    factors its panel's title does not fix), `colour` and `marker` its place in the panel.
    `shown` is False for an arm drawn in grey among the others, past the best few."""

    label: str
    short: str
    colour: tuple[float, float, float, float]
    marker: str
    panel: int
    shown: bool = True


@dataclass(frozen=True)
class Panel:
    """A group of at most `MAX_LINES` arms drawn together; `title` names what they share
    ('' when one panel holds every arm)."""

    title: str
    arms: tuple[str, ...]


@dataclass(frozen=True)
class ArmStyles:
    """Every arm's look, and the panels a figure of all the arms is split into."""

    arms: dict[str, ArmStyle]
    panels: tuple[Panel, ...]
    others: int = 0  # arms drawn in grey, unnamed: too many to show apart

    def __getitem__(self, arm: str) -> ArmStyle:
        return self.arms[arm]

    def panels_of(self, shown) -> list[Panel]:
        """The panels that hold any of the arms `shown` (a figure without every arm), each with
        only those arms, in study order."""
        shown = set(shown)
        kept = [Panel(p.title, tuple(a for a in p.arms if a in shown)) for p in self.panels]
        return [p for p in kept if p.arms]

    def labels(self) -> dict[str, str]:
        return {arm: style.label for arm, style in self.arms.items()}

    def name(self, arm: str) -> str | None:
        """What a legend calls `arm`: its short name in one of several panels, its full name
        in the only one, nothing for an arm in grey."""
        style = self.arms[arm]
        if not style.shown:
            return None
        return style.short if len(self.panels) > 1 else style.label

    def others_entry(self) -> str:
        """The legend entry of the arms in grey."""
        return f"the other {self.others} arms"


def varying(record: StudyRecord) -> dict[str, list[Any]]:
    """The grid factors that take more than one value, with their values in grid order; all of
    them when none varies (one arm)."""
    grid = record.grid
    return {k: v for k, v in grid.items() if len(v) > 1} or grid


def arm_label(factors: dict[str, Any], names) -> str:
    """An arm named by the factors `names`, each value as the arm id spells it (`data_fraction=1`,
    never `1.0` in one figure and `1` in another)."""
    return ", ".join(f"{k}={factor_value(k, factors.get(k))}" for k in names)


def arm_styles(record: StudyRecord) -> ArmStyles:
    """The look of every arm of `record` and the panels of a figure that draws them all."""
    arms = list(record.arms)
    factors = varying(record)
    if len(arms) <= MAX_LINES:
        styles = {arm: _style(record.arms[arm], factors, factors, i, 0, arm)
                  for i, arm in enumerate(arms)}  # fmt: skip
        return ArmStyles(styles, (Panel("", tuple(arms)),))
    names = list(factors)
    inside, lines = len(names), 1  # factors names[inside:] vary inside a panel
    while inside > 0 and lines * len(factors[names[inside - 1]]) <= MAX_LINES:
        inside -= 1
        lines *= len(factors[names[inside]])
    fixed = names[:inside]  # choose the panel; the last of them may be split into runs
    panels_unsplit = math.prod(len(factors[k]) for k in fixed)
    split = fixed[-1] if fixed and (lines == 1 or panels_unsplit > MAX_PANELS) else None
    runs = _runs(len(factors[split]), MAX_LINES // lines) if split else []
    keys: dict[tuple, list[str]] = {}
    places: dict[str, int] = {}
    for arm in arms:
        values = record.arms[arm]
        index = [_index(factors[k], values.get(k)) for k in names]
        key = tuple(index[: len(fixed) - (split is not None)])
        place = _mixed_radix(index[inside:], [len(factors[k]) for k in names[inside:]])
        if split is not None:
            run = runs[index[len(fixed) - 1]]
            key += (run[0],)
            place += run[1] * lines
        keys.setdefault(key, []).append(arm)
        places[arm] = place
    if len(keys) > MAX_PANELS:
        return _best_few(record, factors)
    panels, styles = [], {}
    for number, members in enumerate(keys.values()):
        title = _panel_title(record, members, fixed, split)
        panels.append(Panel(title, tuple(members)))
        shown = [k for k in names if k not in fixed or k == split]
        for arm in members:
            styles[arm] = _style(record.arms[arm], factors, shown, places[arm], number, arm)
    ordered = {arm: styles[arm] for arm in arms}
    return ArmStyles(ordered, tuple(panels))


def _best_few(record: StudyRecord, factors: dict) -> ArmStyles:
    """One panel: the `MAX_LINES` best arms by the study's metric (their mean over completed
    confirm trials, else over completed explore trials), coloured in the study's order, and
    the rest in grey."""
    metric, mode = record.study_metric
    t = record.trials
    done = t[t.status == "completed"] if "status" in t else t
    scores = pd.Series(dtype=float)
    for phase in ("confirm", "explore"):
        rows = done[done.phase == phase] if "phase" in done else done
        if metric in rows and rows[metric].notna().any():
            scores = rows.groupby("arm")[metric].mean()
            break
    ranked = sorted(record.arms, key=lambda a: _rank(scores.get(a), mode))
    best = set(ranked[:MAX_LINES])
    title = f"the best {MAX_LINES} of {len(record.arms)} arms by {metric}; the others grey"
    styles, place = {}, 0
    for arm, values in record.arms.items():
        label = arm_label(values, factors) or arm
        if arm in best:
            styles[arm] = ArmStyle(label, label, PALETTE[place], MARKERS[place], 0)
            place += 1
        else:
            styles[arm] = ArmStyle(label, label, OTHERS, "", 0, shown=False)
    panel = Panel(title, tuple(record.arms))
    return ArmStyles(styles, (panel,), others=len(record.arms) - len(best))


def _rank(score, mode: str) -> float:
    if score is None or not math.isfinite(float(score)):
        return math.inf
    return float(score) if mode == "min" else -float(score)


def _style(values: dict, factors: dict, shown, place: int, panel: int, arm: str) -> ArmStyle:
    label = arm_label(values, factors) or arm
    short = arm_label(values, shown) or label
    return ArmStyle(label, short, PALETTE[place], MARKERS[place], panel)


def _index(values: list[Any], value: Any) -> int:
    return next(i for i, v in enumerate(values) if v == value)


def _mixed_radix(digits: list[int], sizes: list[int]) -> int:
    out = 0
    for digit, size in zip(digits, sizes, strict=True):
        out = out * size + digit
    return out


def _runs(count: int, most: int) -> list[tuple[int, int]]:
    """For each of `count` values in order: (its run, its place in the run), in runs of at
    most `most` values, as even as they can be (10 values by 8: 5 and 5, not 8 and 2)."""
    pieces = math.ceil(count / most)
    run_of = [i * pieces // count for i in range(count)]
    starts = {run: run_of.index(run) for run in set(run_of)}
    return [(run, i - starts[run]) for i, run in enumerate(run_of)]


def _panel_title(record: StudyRecord, members: list[str], fixed: list[str], split) -> str:
    values = record.arms[members[0]]
    parts = [f"{k}={factor_value(k, values.get(k))}" for k in fixed if k != split]
    if split is not None:
        own = list(dict.fromkeys(factor_value(split, record.arms[a].get(split)) for a in members))
        parts.append(f"{split}={own[0]}" if len(own) == 1 else f"{split} ∈ {{{', '.join(own)}}}")
    return ", ".join(parts)
