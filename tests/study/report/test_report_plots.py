"""Every figure of the report, drawn at 2 arms and at 36 from hand-built tables, read back with
matplotlib's renderer: no two texts (tick labels, axis labels, titles, legend entries) over
one another, all inside the figure, and no tick label under the minimum size. The numbers are
synthetic; only the number of arms and the length of their names matter."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import LogNorm

from study.report import arm_styles, layer_pairs, layer_views, plots, readable
from study.report.section import _no_figures, all_sections
from study.report.sections import expected_max, stages
from study.tracking.reading import StudyRecord

LAYERS = 7  # hidden states 0..6, blocks 0..5
SEEDS = (0, 1, 2)
GRIDS = {  # 2 arms, 6 (ner_reinit's published report: panels wrap), and up to 100 arms
    2: {"reinit_from": [4, 6], "data_fraction": [0.5]},
    6: {"reinit_from": [4, 5, 6], "data_fraction": [0.5, 1.0]},
    12: {"reinit_from": [3, 4, 5, 6], "data_fraction": [0.1, 0.5, 1.0]},
    36: {"reinit_from": list(range(12)), "data_fraction": [0.01, 0.1, 0.5]},
    100: {"reinit_from": list(range(25)), "data_fraction": [0.01, 0.1, 0.5, 1.0]},
}
# sections whose figures are drawn below; a new figure must join them
COVERED = {"expected_max", "stages", "layers_seeds", "layers_arms", "layers_data"}


def synthetic_record(arms_wanted: int) -> StudyRecord:
    grid = GRIDS[arms_wanted]
    combos = [dict(zip(grid, v, strict=True)) for v in itertools.product(*grid.values())]
    arms = {",".join(f"{k}={v}" for k, v in factors.items()): factors for factors in combos}
    rng = np.random.default_rng(arms_wanted)
    rows = []
    for index, (arm, factors) in enumerate(arms.items()):
        for sample, lr in enumerate((1e-5, 3e-5, 1e-4)):
            for seed in SEEDS:
                status = "pruned" if seed == 2 and sample == 0 else "completed"
                rows.append({"phase": "explore", "sample": sample, "lr": lr, "seed": seed,
                             "status": status, "arm": arm, "arm_index": index,
                             **factors})  # fmt: skip
        for seed in SEEDS:
            rows.append({"phase": "confirm", "sample": 0, "lr": 3e-5, "seed": seed,
                         "status": "completed", "arm": arm, "arm_index": index,
                         "fingerprint_bytes": 1e6, **factors})  # fmt: skip
    trials = pd.DataFrame(rows)
    trials["run_id"] = [f"run{i}" for i in range(len(trials))]
    for metric in ("dev_f1", "test_f1", "curve_area"):
        trials[metric] = rng.uniform(0.3, 0.9, len(trials))
    trials["steps_to_95"] = rng.uniform(100, 900, len(trials))
    trials["duration_s"] = rng.uniform(600, 1200, len(trials))
    plan = {"search": {"lr": {"type": "loguniform", "low": 1e-5, "high": 1e-4}},
            "metric": {"name": "dev_f1", "mode": "max"}}  # fmt: skip
    tags = {"compare_baseline": json.dumps({"reinit_from": 6})}
    return StudyRecord("ner_reinit", "study", "sqlite://", tags, plan, arms, {}, trials)


def learning_curves(record: StudyRecord) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = [(arm, seed, 50 * (e + 1), e, rng.uniform(0.2, 0.9))
            for arm in record.arms for seed in SEEDS for e in range(6)]  # fmt: skip
    return pd.DataFrame(rows, columns=["arm", "seed", "step", "evaluation", "dev_f1"])


def layer_dynamics(record: StudyRecord) -> pd.DataFrame:
    """Re-drawn blocks (below reinit_from) move ~100x more than fine-tuned ones, as measured."""
    rng = np.random.default_rng(2)
    rows = []
    for arm, factors in record.arms.items():
        for seed, layer in itertools.product(SEEDS, range(LAYERS)):
            redrawn = layer >= factors["reinit_from"]
            rows += [(arm, seed, "l2_sum", layer, rng.uniform(150, 200) if redrawn else
                      rng.uniform(0.5, 3)), (arm, seed, "attn_js", layer, rng.uniform(0, 0.3)),
                     (arm, seed, "cka", layer, rng.uniform(0.2, 1)),
                     (arm, seed, "svcca", layer, rng.uniform(0, 0.8))]  # fmt: skip
    return pd.DataFrame(rows, columns=["arm", "seed", "metric", "layer", "value"])


def stage_tables(record: StudyRecord) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(3)
    curves, moved = [], []
    for arm in record.arms:
        for position, stage in enumerate(("spans", stages.TARGET)):
            curves += [(arm, seed, stage, position, 40 * e, e, rng.uniform(0.2, 0.9))
                       for seed in SEEDS for e in range(5)]  # fmt: skip
            moved += [(arm, stage, position, measure, layer, rng.uniform(0, 5), 3)
                      for measure in stages.MEASURES for layer in range(LAYERS)]  # fmt: skip
    return {
        stages.CURVES: pd.DataFrame(curves, columns=["arm", "seed", "stage", "position", "step",
                                                      "evaluation", "dev_f1"]),
        stages.MOVED: pd.DataFrame(moved, columns=["arm", "stage", "position", "measure",
                                                   "layer", "value", "n"]),
    }  # fmt: skip


def layer_table(record: StudyRecord) -> pd.DataFrame:
    """A value per planned pair, measure and layer: what the fingerprints would give."""
    rng = np.random.default_rng(4)
    rows = []
    for pair in layer_pairs.planned(record):
        for measure in ("cka", "svcca", "attn_js"):
            rows += [(pair.kind, pair.arm_a, pair.arm_b, pair.factor, pair.unit_a, pair.unit_b,
                      measure, layer, rng.uniform(0, 1))
                     for layer in range(LAYERS - (measure == "attn_js"))]  # fmt: skip
    return pd.DataFrame(rows, columns=layer_pairs.COLUMNS)


def draw_all(record: StudyRecord, folder: Path) -> dict[str, Path | None]:
    """Every figure the report makes, by its own functions, on the synthetic tables: the
    per-arm figures and those drawn per factor or per layer."""
    drawn = draw_arm_figures(record, folder)
    drawn["heatmap"] = plots.factor_heatmap(record, "test_f1", folder / "heatmap.png")
    drawn["dynamics"] = plots.dynamics_heatmaps(
        layer_dynamics(record), record, folder / "dynamics.png"
    )
    for section in all_sections():
        if section.name.startswith("layers_"):
            drawn.update(section.figures(record, section.tables(record), folder))
    return drawn


def problems(fig, drawn: bool = False) -> list[str]:
    """What a reader could not read in `fig`; `drawn`: it is drawn at its final size already
    (by `save_figure`), and drawing it again would only take time."""
    if not drawn:
        fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    shown = readable.figure_words(fig)
    boxes = [t.get_window_extent(renderer) for t in shown]
    page = fig.bbox
    out = [f"{t.get_text()!r} is outside the figure" for t, b in zip(shown, boxes, strict=True)
           if b.x0 < page.x0 - 1 or b.y0 < page.y0 - 1 or b.x1 > page.x1 + 1
           or b.y1 > page.y1 + 1]  # fmt: skip
    corners = np.array([b.extents for b in boxes]).reshape(-1, 4)  # x0, y0, x1, y1
    x0, y0, x1, y1 = (corners[:, [i]] for i in range(4))
    # two boxes overlap by more than half a pixel both ways (vectorised: a figure has ~1,000)
    clash = (np.minimum(x1, x1.T) - np.maximum(x0, x0.T) > 0.5) & (
        np.minimum(y1, y1.T) - np.maximum(y0, y0.T) > 0.5
    )
    for i, j in zip(*np.nonzero(np.triu(clash, 1)), strict=True):
        out.append(f"{shown[i].get_text()!r} overlaps {shown[j].get_text()!r}")
    for ax in fig.axes:
        labels = [*readable.tick_labels(ax.xaxis), *readable.tick_labels(ax.yaxis)]
        out += [f"tick label {t.get_text()!r} is {t.get_fontsize()} pt" for t in labels
                if t.get_fontsize() < readable.MIN_PT]  # fmt: skip
    return out


@pytest.fixture
def kept_figures(monkeypatch):
    """The figures `save_figure` closes, kept open to be measured (closed at the end)."""
    kept, close = {}, plt.close
    monkeypatch.setattr(plt, "close", lambda fig: kept.setdefault(id(fig), fig))
    monkeypatch.setattr(layer_pairs, "layer_table", layer_table)
    yield kept
    for fig in kept.values():
        close(fig)


@pytest.mark.slow  # over ~7 s: the slow tier
@pytest.mark.parametrize("arms", [2, 6, 36])
def test_every_figure_is_readable(tmp_path, kept_figures, arms):
    record = synthetic_record(arms)
    assert len(record.arms) == arms
    drawn = draw_all(record, tmp_path)
    expected = {"lr_vs_f1", "learning_curves", "seeds", "dynamics", "expected_max",
                "stage_curves", "stage_dynamics", "layers_seeds", "layers_arms"}  # fmt: skip
    if arms > 2:  # two factors of several values; at 2 arms only reinit_from varies
        expected |= {"heatmap", "layers_data"}
    assert {name for name, path in drawn.items() if path} >= expected
    assert len(kept_figures) == len([p for p in drawn.values() if p])
    found = {}
    for fig in kept_figures.values():
        found.update({fig.get_suptitle() or id(fig): problems(fig, drawn=True)})
    assert not {title: bad for title, bad in found.items() if bad}


def draw_arm_figures(record: StudyRecord, folder: Path) -> dict[str, Path | None]:
    """The figures that draw a mark per arm (lines, points), which `arm_styles` styles."""
    drawn = {
        "lr_vs_f1": plots.lr_vs_f1(record, folder / "lr_vs_f1.png"),
        "learning_curves": plots.learning_curves(
            learning_curves(record), record, folder / "learning_curves.png"
        ),
        "seeds": plots.seed_distributions(record, folder / "seeds.png"),
        "expected_max": expected_max.plot_expected_max(
            record, expected_max.expected_max_table(record), folder / "expected_max.png"
        ),
    }
    drawn.update(stages.SECTION.figures(record, stage_tables(record), folder))
    return drawn


def arm_marks(ax, arms) -> dict[str, set]:
    """Per arm drawn in a panel (its marks carry the arm's id as gid), the colours and
    markers of its marks."""
    out: dict[str, set] = {}
    for line in ax.get_lines():
        if line.get_gid() in arms:
            rgb = tuple(np.round(matplotlib.colors.to_rgba(line.get_color())[:3], 3))
            out.setdefault(line.get_gid(), set()).add(("colour", rgb))
            if line.get_marker() not in ("None", None, ""):
                out[line.get_gid()].add(("marker", line.get_marker()))
    for points in ax.collections:
        if points.get_gid() in arms:
            colours = [*points.get_facecolor(), *points.get_edgecolor()]
            rgb = {tuple(np.round(c[:3], 3)) for c in colours if c[3] > 0}
            rgb -= {(0.0, 0.0, 0.0)}  # a kept checkpoint's black edge
            out.setdefault(points.get_gid(), set()).update(("colour", c) for c in rgb)
    return out


@pytest.fixture
def growth(monkeypatch):
    """How much `make_readable` grew each figure it laid out (wider, taller), by figure."""
    grown, lay_out = {}, readable.make_readable

    def measured(fig, *args):
        before = fig.get_size_inches()
        lay_out(fig, *args)
        grown[id(fig)] = tuple(fig.get_size_inches() / before)

    monkeypatch.setattr(plots, "make_readable", measured)
    return grown


# the 36- and 100-arm reports draw hundreds of panels' worth of text checks: the slow tier
@pytest.mark.parametrize(
    "arms",
    [2, 12, pytest.param(36, marks=pytest.mark.slow), pytest.param(100, marks=pytest.mark.slow)],
)
def test_arm_figures_stay_readable_at_any_number_of_arms(tmp_path, kept_figures, growth, arms):
    """At 2 arms one panel; past 8, small multiples of at most 8 arms a panel; at 100 (more
    panels than a page holds) the 8 best arms in colour and the rest in grey. No two coloured
    arms of a panel alike, every arm one colour and marker in all figures (its `arm_styles`
    look), arm names spelt as their ids, no words over one another, no mostly-empty figure."""
    record = synthetic_record(arms)
    styles = arm_styles.arm_styles(record)
    shown = {arm for arm in record.arms if styles[arm].shown}
    drawn = draw_arm_figures(record, tmp_path)
    assert all(drawn.values()) and len(kept_figures) == len(drawn)
    seen: dict[str, set] = {}
    for fig in kept_figures.values():
        title = fig.get_suptitle()
        panels = [ax for ax in fig.axes if ax.get_visible()]
        marked = [arm_marks(ax, record.arms) for ax in panels]
        assert set().union(*marked) >= shown, title
        banded = "per-seed" in title  # one axes per metric, the groups of arms in bands
        for ax, marks in zip(panels, marked, strict=True):
            groups: dict[int, list[str]] = {}
            for arm in marks:
                if arm in shown:
                    groups.setdefault(styles[arm].panel, []).append(arm)
            assert banded or len(groups) == 1, title  # a panel holds one group of arms
            for coloured in groups.values():
                assert 1 <= len(coloured) <= arm_styles.MAX_LINES, title
                colours = [c for arm in coloured for kind, c in marks[arm] if kind == "colour"]
                assert len(colours) == len(set(colours)) == len(coloured), title
            for arm, own in marks.items():
                seen.setdefault(arm, set()).update(own)
            if banded:  # a seed's grey line joins the boxes of one band only
                seed_lines = [line for line in ax.get_lines() if line.get_color() == "grey"]
                assert seed_lines, title
                assert all(len(line.get_xdata()) <= arm_styles.MAX_LINES for line in seed_lines)
        words = " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))
        assert "data_fraction=1.0" not in words and record.name in title
        assert problems(fig, drawn=True) == [], title
        # laid out as drawn, not grown until words cleared (as a legend over a legend grew
        # ner_reinit's lr_vs_f1 to 891 x 1485 pixels, mostly empty), nor a page-sized poster
        assert max(growth[id(fig)]) < 1.3, (title, growth[id(fig)])
        width, height = fig.get_size_inches()
        assert max(width / height, height / width) < 4 and width * height < 300, title
        for ax in panels:  # no panel squeezed to a strip
            box = ax.get_window_extent()
            assert box.width > 1.2 * fig.dpi and box.height > 0.8 * fig.dpi, title
    for arm, own in seen.items():
        look = styles[arm]
        assert {c for kind, c in own if kind == "colour"} == {tuple(np.round(look.colour[:3], 3))}
        assert {m for kind, m in own if kind == "marker"} <= {look.marker}
    if arms > 36:  # the coloured ones are the best by the study's metric, the rest grey
        done = record.confirm_completed().groupby("arm").dev_f1.mean()
        assert shown == set(done.nlargest(arm_styles.MAX_LINES).index)
    else:
        assert shown == set(record.arms)


def test_every_figure_of_the_report_is_drawn_here():
    """A section that draws a figure this test does not draw fails here, not in a reader's
    report."""
    drawing = {s.name for s in all_sections() if s.figures is not _no_figures}
    assert drawing <= COVERED


def test_dynamics_are_bright_where_unchanged_and_the_weight_distance_is_log_scaled(
    tmp_path, kept_figures
):
    record = synthetic_record(36)
    plots.dynamics_heatmaps(layer_dynamics(record), record, tmp_path / "d.png")
    (fig,) = kept_figures.values()
    panels = {ax.get_title(): ax for ax in fig.axes if ax.images}
    l2 = next(ax for title, ax in panels.items() if title.startswith("weight L2"))
    image = l2.images[0]
    assert isinstance(image.norm, LogNorm)
    values = np.asarray(image.get_array(), float)
    moved = values[values < 10]  # blocks that were fine-tuned, not re-drawn
    # the fine-tuned blocks spread over the colours rather than sharing one end of the scale
    assert np.ptp(image.norm(moved)) > 0.2
    for ax in panels.values():
        cmap = ax.images[0].cmap.name
        assert cmap == ("viridis" if ax.get_title().startswith("linear CKA") else "viridis_r")
    assert all("bright = unchanged" in ax.get_ylabel() for ax in fig.axes if not ax.images)


def test_heatmap_marks_the_baseline_and_picks_a_readable_number_colour(tmp_path, kept_figures):
    record = synthetic_record(36)
    plots.factor_heatmap(record, "test_f1", tmp_path / "h.png")
    (fig,) = kept_figures.values()
    ax = fig.axes[0]
    assert "6 (baseline)" in [t.get_text() for t in ax.get_yticklabels()]
    assert len(ax.patches) == len(GRIDS[36]["data_fraction"])  # the baseline row's cells
    image = ax.images[0]
    colours = set()
    for text in ax.texts:
        j, i = (round(c) for c in text.get_position())
        cell = luminance(image.cmap(image.norm(image.get_array()[i, j])))
        chosen, other = (0.0, 1.0) if text.get_color() == "black" else (1.0, 0.0)
        assert contrast(chosen, cell) >= contrast(other, cell)
        colours.add(text.get_color())
    assert colours == {"black", "white"}  # the synthetic values span light and dark cells


def luminance(rgba) -> float:
    """WCAG 2 relative luminance of an sRGB colour."""
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgba[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: float, b: float) -> float:
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def test_expected_max_counts_runs_in_whole_numbers(tmp_path, kept_figures):
    record = synthetic_record(2)
    table = expected_max.expected_max_table(record)
    expected_max.plot_expected_max(record, table, tmp_path / "e.png")
    (fig,) = kept_figures.values()
    ticks = fig.axes[0].get_xticks()
    shown = ticks[(ticks >= 1) & (ticks <= len(SEEDS))]
    assert len(shown) >= 2 and np.all(shown == np.round(shown))


def test_pruned_trials_stay_out_of_the_lines_of_lr_vs_f1(tmp_path, kept_figures):
    record = synthetic_record(2)
    plots.lr_vs_f1(record, tmp_path / "l.png")
    (fig,) = kept_figures.values()
    ax = fig.axes[0]
    t = record.trials
    done = t[(t.phase == "explore") & (t.status == "completed")]
    arm = next(iter(record.arms))
    means = done[done.arm == arm].groupby("lr").dev_f1.mean()
    line = ax.get_lines()[0]
    assert np.allclose(line.get_ydata(), means.to_numpy())
    legends = [ax.get_legend(), *fig.legends]  # the arms beside the panel, the kinds under it
    words = " ".join(t.get_text() for legend in legends for t in legend.get_texts())
    assert "pruned" in words and "not in the line" in words


def test_the_median_of_seeds_has_a_colour_no_arm_has(tmp_path, kept_figures):
    record = synthetic_record(36)
    plots.seed_distributions(record, tmp_path / "s.png")
    (fig,) = kept_figures.values()
    arm_colours = {tuple(np.round(c[:3], 3)) for c in arm_styles.PALETTE}
    medians = [line for line in fig.axes[0].get_lines() if line.get_color() == "black"]
    assert medians and (0.0, 0.0, 0.0) not in arm_colours


def test_a_crowded_figure_grows_until_its_labels_clear(tmp_path, kept_figures):
    """36 wrapped arm names under a 3-inch axis and 60 rows beside a 2-inch one: the names are
    turned upright on one line and the figure grows, rather than the text shrinking."""
    names = list(arm_styles.arm_styles(synthetic_record(36)).labels().values())
    fig, ax = plots.subplots(figsize=(3, 2))
    ax.set_xticks(range(36), [name.replace(", ", "\n") for name in names], fontsize=5)
    ax.set_yticks(range(60), [str(i) for i in range(60)])
    plots.save_figure(fig, tmp_path / "crowded.png")
    assert problems(fig) == []
    assert [t.get_text() for t in ax.get_xticklabels()] == names
    width, height = fig.get_size_inches()
    assert width > 3 and height > 2


def test_a_panel_title_wider_than_its_panel_clears_its_neighbours(tmp_path, kept_figures):
    """Two pairs over a 3-layer model (the tiny model's layer figures): each panel is narrower
    than its title, which stood over the colour-bar label of the panel beside it until the
    figure grew to fit."""
    table = pd.DataFrame(
        [{"group": "depth=2", "pair": f"depth=2, seed {seed}", "measure": measure,
          "layer": layer, "value": 0.5 + 0.1 * layer}
         for seed in (2, 3) for measure in ("cka", "svcca", "attn_js")
         for layer in range(3 - (measure == "attn_js"))]
    )  # fmt: skip
    layer_views.heatmap(table, "Layers across seeds", tmp_path / "layers.png")
    (fig,) = kept_figures.values()
    assert problems(fig) == []
