"""The axes of a report figure: laid out under constrained layout, and for a figure that draws
arms, one panel per group of arms (`arm_styles` decides the groups: one panel for a few arms,
small multiples for many), each with its legend beside it, so a legend never covers the
lines, and the axis labels once per row and column, so 13 panels do not repeat them 13 times.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")  # no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from study.report.arm_styles import OTHERS, ArmStyles  # noqa: E402
from study.report.readable import MIN_PT  # noqa: E402

COLUMNS = 3  # panels of a figure of one axes per panel side by side, before a new row


def subplots(*args, **kwargs):
    """`plt.subplots` under constrained layout, which keeps suptitles, colour bars and the
    legends beside the axes clear of everything else."""
    return plt.subplots(*args, layout="constrained", **kwargs)


def panel_figure(
    count: int,
    per: int = 1,
    size: tuple[float, float] = (4.2, 3.0),
    columns: int = COLUMNS,
    legend: float = 0.0,
    **share,
) -> tuple[Figure, list[list[Axes]]]:
    """A figure for `count` panels of `per` axes each (`size` inches an axes): with one axes a
    panel, the panels side by side, `columns` to a row; with more (one per measure, stage or
    x quantity), a row per panel. `legend`: inches of the legend beside each panel (its last
    axes), made room for rather than found short when the figure is drawn. The axes by panel;
    unused cells hidden. `share`: sharex and sharey as for `plt.subplots`."""
    if per == 1:
        columns = min(count, columns)
        rows = math.ceil(count / columns)
        width = (size[0] + legend) * columns
    else:
        columns, rows = per, count
        width = size[0] * columns + legend
    fig, grid = subplots(rows, columns, figsize=(width, size[1] * rows), squeeze=False,
                         **share)  # fmt: skip
    cells = list(grid.flat)
    for ax in cells[count * per :]:
        ax.set_visible(False)
    return fig, [cells[i * per : (i + 1) * per] for i in range(count)]


def label_outer(panels: list[list[Axes]], xlabel: str, ylabel: str) -> None:
    """Axis labels on the panels of the left column and on the lowest panel of each column
    (a figure of one axes per panel), so they are said once per row and column."""
    axes = [cell[0] for cell in panels]
    columns = axes[0].get_subplotspec().get_gridspec().ncols
    for i, ax in enumerate(axes):
        ax.set_ylabel(ylabel if i % columns == 0 else "")
        ax.set_xlabel(xlabel if i + columns >= len(axes) else "")


def legend_room(styles: ArmStyles, extra: int = 0) -> float:
    """Inches the legend of `panel_legend` takes beside a panel: its longest entry, with
    `extra` characters more on each arm's (the seeds' count), at the legend's font size."""
    names = [styles.name(arm) for arm in styles.arms]
    longest = max([len(n) + extra for n in names if n] + [len(styles.others_entry())])
    return 0.06 * longest + 0.7


def panel_legend(ax: Axes, styles: ArmStyles, title: str | None = None) -> None:
    """The legend of a panel's arms beside it, on the right, where it covers no line; the arms
    in grey, past the best few, as one entry."""
    handles, labels = ax.get_legend_handles_labels()
    if styles.others:
        handles.append(plt.Line2D([], [], color=OTHERS, lw=1))
        labels.append(styles.others_entry())
    if labels:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0,
                  fontsize=MIN_PT, title=title, title_fontsize=MIN_PT)  # fmt: skip
