"""A report figure laid out so that its words can be read: no tick label under `MIN_PT`, and no
two words (titles, axis and tick labels, legends) over one another. Where they collide the
figure grows, rather than the text shrinking, so 36 arms get a wider figure and a long panel
title over a narrow panel a wider one."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FixedLocator

MIN_PT = 7  # no tick label smaller: a figure scaled to a page stays readable
MOST_GROWTH = 3.0  # a figure grows at most this much each way in one round


def make_readable(fig: Figure, rounds: int = 6) -> None:
    """Lays `fig` out until its words clear one another (or `rounds` run out), and leaves it
    drawn at its final size: crowded x tick labels are first turned upright (one line each),
    then the figure grows where words still collide."""
    for ax in fig.axes:
        for axis, labels in (("x", ax.get_xticklabels()), ("y", ax.get_yticklabels())):
            if any(t.get_fontsize() < MIN_PT for t in labels):
                ax.tick_params(axis=axis, labelsize=MIN_PT)
    for _ in range(rounds):
        fig.canvas.draw()  # lays the figure out (constrained layout, `subplots`)
        wide, tall = _growth_needed(fig)
        if wide == tall == 1.0:
            return
        width, height = fig.get_size_inches()
        fig.set_size_inches(
            width * min(wide * 1.08, MOST_GROWTH), height * min(tall * 1.08, MOST_GROWTH)
        )
    fig.canvas.draw()  # the last size, drawn: what the caller writes


def figure_words(fig: Figure) -> list[Text]:
    """The figure's words that must stand clear of one another: its title, each panel's
    titles, axis labels and shown tick labels, and the legends (not the numbers in cells)."""
    out = [fig._suptitle] if fig._suptitle is not None else []
    legends = {id(legend): legend for legend in fig.legends}
    for ax in fig.axes:
        out += [*tick_labels(ax.xaxis), *tick_labels(ax.yaxis), ax.xaxis.label,
                ax.yaxis.label, ax.title, ax._left_title, ax._right_title]  # fmt: skip
        for legend in [ax.get_legend(), *(a for a in ax.artists if hasattr(a, "get_texts"))]:
            if legend is not None:
                legends[id(legend)] = legend
    for legend in legends.values():
        out += [*legend.get_texts(), legend.get_title()]
    return [t for t in out if t.get_visible() and t.get_text().strip()]


def tick_labels(axis) -> list[Text]:
    """The tick labels an axis shows: matplotlib also keeps labels for ticks outside the view,
    which are never drawn."""
    low, high = sorted(axis.get_view_interval())
    slack = (high - low) * 1e-9
    pairs = zip(axis.get_majorticklocs(), axis.get_majorticklabels(), strict=False)
    inside = [t for at, t in pairs if low - slack <= at <= high + slack]
    return [t for t in inside if t.get_visible() and t.get_text().strip()]


def _growth_needed(fig: Figure) -> tuple[float, float]:
    """How much wider and taller the drawn figure must become (1 = not at all): for crowded
    tick labels along their axis, then for any two words still over one another."""
    renderer = fig.canvas.get_renderer()
    wide = tall = 1.0
    for ax in fig.axes:
        x_need = _crowding(tick_labels(ax.xaxis), renderer, 0)
        if x_need > 1 and _upright(ax):
            x_need = 1.0
            wide = max(wide, 1.0001)  # lay out again with the labels turned
        wide = max(wide, x_need)
        tall = max(tall, _crowding(tick_labels(ax.yaxis), renderer, 1))
    if wide == tall == 1.0:
        wide, tall = _apart(figure_words(fig), renderer)
    return wide, tall


def _crowding(labels, renderer, axis: int) -> float:
    """How much farther apart neighbouring labels must be to clear one another (1 = they do):
    the largest ratio of the room two neighbours need to the room they have."""
    boxes = [t.get_window_extent(renderer) for t in labels]
    spans = sorted((b.x0, b.x1) if axis == 0 else (b.y0, b.y1) for b in boxes)
    need = 1.0
    for (a0, a1), (b0, b1) in zip(spans, spans[1:], strict=False):
        if b0 < a1 + 1:  # over one another, or closer than a pixel
            need = max(need, (a1 - a0 + b1 - b0 + 4) / max(b0 + b1 - a0 - a1, 1e-3))
    return need


def _apart(words: list[Text], renderer) -> tuple[float, float]:
    """The growth (wider, taller) that moves every two overlapping words apart, each pair the
    shorter way: the distance between two words' centres grows with the figure, their own
    size does not."""
    if len(words) < 2:
        return 1.0, 1.0
    x0, y0, x1, y1 = np.array([w.get_window_extent(renderer).extents for w in words]).T
    over_x = np.minimum.outer(x1, x1) - np.maximum.outer(x0, x0)
    over_y = np.minimum.outer(y1, y1) - np.maximum.outer(y0, y0)
    centre_x, centre_y = (x0 + x1) / 2, (y0 + y1) / 2
    wide = tall = 1.0
    for i, j in zip(*np.nonzero(np.triu((over_x > 0.5) & (over_y > 0.5), 1)), strict=True):
        if over_x[i, j] <= over_y[i, j]:
            wide = max(wide, 1 + (over_x[i, j] + 4) / max(abs(centre_x[i] - centre_x[j]), 1))
        else:
            tall = max(tall, 1 + (over_y[i, j] + 4) / max(abs(centre_y[i] - centre_y[j]), 1))
    return wide, tall


def _upright(ax) -> bool:
    """Turn crowded horizontal x labels upright, one line each; False when they already are."""
    labels = tick_labels(ax.xaxis)
    if not labels or all(t.get_rotation() == 90 for t in labels):
        return False
    if isinstance(ax.xaxis.get_major_locator(), FixedLocator):  # named columns (arms)
        one_line = [t.get_text().replace("\n", ", ") for t in ax.get_xticklabels()]
        ax.set_xticks(ax.get_xticks(), one_line)
    ax.tick_params(axis="x", labelrotation=90)
    return True
