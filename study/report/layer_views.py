"""What the three cross-trial layer sections show of `layer_pairs.layer_table`: its rows
named for a reader, the descriptive summary per layer, the claim about low and last layers
as a paired comparison over seed pairs, a layer x pair heatmap, and their Markdown.

Fine-tuned-against-fine-tuned similarity is descriptive: means, spreads and counts, no
p-values. The one claim the literature makes of it (the low layers of two seeds stay more
alike than the last ones) is given as a mean difference over seed pairs with an interval
that treats seeds, not pairs, as the independent units (`study.stats.seed_pair_interval`).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from study import stats  # noqa: E402
from study.report import layer_pairs  # noqa: E402
from study.report.arm_styles import arm_styles  # noqa: E402
from study.report.panels import subplots  # noqa: E402
from study.report.plots import MIN_PT, save_figure, text_colour  # noqa: E402
from study.report.section import Section, Tables  # noqa: E402
from study.report.text import markdown_table  # noqa: E402
from study.tracking.reading import StudyRecord  # noqa: E402

MEASURES = {
    "cka": "linear CKA (1 = the same features)",
    "svcca": "SVCCA distance (0 = the same subspace)",
    "attn_js": "attention JS divergence (nats, 0 = the same attention)",
}
HIDDEN_STATES = ("cka", "svcca")  # per hidden state (0 = embeddings); attn_js per block
DISTANCES = ("svcca", "attn_js")  # lower = more alike
LEVEL = 0.95


def named_rows(record: StudyRecord, kind: str) -> pd.DataFrame:
    """The layer table's rows of one kind, with `pair`: how a reader names the pair."""
    table = layer_pairs.layer_table(record)
    rows = table[table.kind == kind].copy()
    labels = arm_styles(record).labels()
    if kind == "seeds":
        rows["group"] = rows.arm_a.map(labels)
        units = zip(rows.arm_a, rows.unit_a, rows.unit_b, strict=True)
        rows["pair"] = [f"{labels[a]}: {u} vs {v}" for a, u, v in units]
    else:
        rows["group"] = [f"{labels[a]} vs {labels[b]}"
                         for a, b in zip(rows.arm_a, rows.arm_b, strict=True)]  # fmt: skip
        rows["pair"] = [f"{g}, seed {u}" for g, u in zip(rows.group, rows.unit_a, strict=True)]
    return rows.reset_index(drop=True)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per group (an arm, or an arm pair), measure and layer: mean, sd, n pairs, min, max."""
    grouped = rows.groupby(["group", "measure", "layer"], sort=False)["value"]
    out = grouped.agg(["mean", "std", "count", "min", "max"]).reset_index()
    return out.rename(columns={"std": "sd", "count": "n_pairs"})


def low_vs_last(rows: pd.DataFrame) -> pd.DataFrame:
    """Per arm and measure, over its seed pairs: how much more alike the first block's layer
    is than the last one (similarity of the low layer minus that of the last; for the
    distances, the last one's distance minus the low one's): positive = the low layer is more
    alike across seeds. Mean with its jackknife-over-seeds interval (`LEVEL`)."""
    out = []
    for (group, measure), part in rows.groupby(["group", "measure"], sort=False):
        low, last = (1 if measure in HIDDEN_STATES else 0), int(part.layer.max())
        if last <= low:
            continue
        at = part.pivot_table(index=["unit_a", "unit_b"], columns="layer", values="value")
        sign = -1.0 if measure in DISTANCES else 1.0
        advantage = sign * (at[low] - at[last])
        interval = stats.seed_pair_interval(advantage.to_dict(), LEVEL)
        out.append({"group": group, "measure": measure, "low_layer": low, "last_layer": last,
                    **interval, "reading": _reading(interval)})  # fmt: skip
    return pd.DataFrame(out)


def _reading(interval: dict[str, float]) -> str:
    if math.isnan(interval["low"]):
        return f"no interval (needs every pair of >= {stats.PAIR_MIN_SEEDS} seeds)"
    if interval["low"] > 0:
        return "low layer more alike"
    if interval["high"] < 0:
        return "last layer more alike"
    return "no difference shown"


def heatmap(rows: pd.DataFrame, title: str, path: Path) -> Path | None:
    """One panel per measure, side by side: a row per pair, a column per layer, each cell one
    pair's value. Pairs run down the page, so their names stay horizontal and full size
    however many there are; bright = alike in every panel (reversed for the distances)."""
    if rows.empty:
        return None
    pairs = list(dict.fromkeys(rows.pair))
    measures = [m for m in MEASURES if m in set(rows.measure)]
    numbers = len(pairs) <= 12
    layers = int(rows.layer.max()) + 1
    cell_w, cell_h = (0.42, 0.3) if numbers else (0.24, 0.16)
    width = (cell_w * layers + 1.4) * len(measures) + 0.07 * max(len(p) for p in pairs) + 0.8
    fig, axes = subplots(1, len(measures), figsize=(width, cell_h * len(pairs) + 2.2),
                             squeeze=False, sharey=True)  # fmt: skip
    for ax, measure in zip(axes[0], measures, strict=True):
        grid = rows[rows.measure == measure].pivot_table(index="pair", columns="layer",
                                                         values="value", sort=False)  # fmt: skip
        values = grid.reindex(index=pairs).to_numpy(float)
        cmap = "viridis_r" if measure in DISTANCES else "viridis"
        image = ax.imshow(values, cmap=cmap, aspect="auto")
        if numbers:
            for (i, j), value in np.ndenumerate(values):
                colour = text_colour(image.cmap(image.norm(value)))
                ax.text(j, i, f"{value:.2g}", ha="center", va="center", fontsize=MIN_PT,
                        color=colour)  # fmt: skip
        ax.set_xticks(range(len(grid.columns)), [str(i) for i in grid.columns])
        ax.set_xlabel("hidden state (0 = embeddings)" if measure in HIDDEN_STATES else "block")
        ax.set_yticks(range(len(pairs)), pairs)
        for edge in _group_edges(rows, pairs):
            ax.axhline(edge, color="white", lw=1.5)
        ax.set_title(MEASURES[measure], fontsize=8)
        small = " (small distance)" if measure in DISTANCES else ""
        fig.colorbar(image, ax=ax, fraction=0.08, label=f"bright = alike{small}")
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def _group_edges(rows: pd.DataFrame, pairs: list[str]) -> list[float]:
    """Where one group (an arm, or an arm pair) of rows ends and the next begins, so a white
    line parts them."""
    group = dict(zip(rows.pair, rows.group, strict=True))
    return [i - 0.5 for i in range(1, len(pairs)) if group[pairs[i]] != group[pairs[i - 1]]]


def summary_markdown(table: pd.DataFrame) -> str:
    """Per measure a table: layers down, groups across, mean ± sd (n pairs)."""
    parts = []
    for measure, part in table.groupby("measure", sort=False):
        groups = list(dict.fromkeys(part.group))
        cells = {(r.layer, r.group): f"{_fig(r.mean)} ± {_fig(r.sd, 2)} ({r.n_pairs})"
                 for r in part.itertuples()}  # fmt: skip
        layer_name = "hidden state" if measure in HIDDEN_STATES else "block"
        rows = [[str(layer), *(cells.get((layer, g), "–") for g in groups)]
                for layer in sorted(set(part.layer))]  # fmt: skip
        parts += [f"*{MEASURES[measure]}*", "", markdown_table([layer_name, *groups], rows), ""]
    return "\n".join(parts).rstrip()


def claim_markdown(table: pd.DataFrame) -> str:
    header = ["arm", "measure", "low vs last layer", "mean advantage of the low layer",
              f"{LEVEL:.0%} interval", "seeds", "seed pairs", "reading"]  # fmt: skip
    rows = [[r.group, r.measure, f"{r.low_layer} vs {r.last_layer}", _fig(r.mean),
             f"[{_fig(r.low)}, {_fig(r.high)}]", str(int(r.seeds)), str(int(r.pairs)),
             r.reading] for r in table.itertuples()]  # fmt: skip
    return markdown_table(header, rows)


def _fig(value: float, digits: int = 3) -> str:
    """Significant digits whatever the size: JS divergences are often 1e-3 or less."""
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}g}"


def _bytes(size: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size:.0f} B"


def kept_line(record: StudyRecord) -> str:
    """What the fingerprints are: how many, their size, how many sentences they hold."""
    rows = layer_pairs.kept(record)
    if rows.empty:
        return (f"The confirm trials kept no layer fingerprints, so no layers are compared "
                f"across trials; a study keeps them with {layer_pairs.KEEP_SETTINGS}.")  # fmt: skip
    size = rows["fingerprint_bytes"].astype(float)
    sentences = sorted({int(n) for n in rows.get("fingerprint_sentences", []) if n == n})
    held = "-".join(str(n) for n in sentences[:: max(1, len(sentences) - 1)])
    sizes = "-".join(dict.fromkeys(_bytes(v) for v in (size.min(), size.max())))
    lost = layer_pairs.layer_table(record).attrs.get("unreadable", [])
    return (f"From the layer fingerprints of {len(rows)} confirm trials (MLflow artifacts "
            f"`fingerprint/`: every layer's hidden states and attention maps on the dynamics "
            f"sample, real tokens only, half precision; {sizes} per trial"
            + (f", {held} sentences" if held else "") + ")"
            + (f"; {len(lost)} of them could not be read from the store and are left out"
               if lost else "") + ".")  # fmt: skip


INTRO = (
    "Layer by layer, from the trials' fingerprints alone: linear CKA and SVCCA distance per "
    "hidden state (0 = embeddings, i = output of block i) over all real tokens of the "
    "dynamics sample, attention JS divergence per block (0 = the first) averaged over heads, "
    "query tokens and sentences. Descriptive: mean ± sd over pairs (n pairs), no p-values."
)


def layer_section(kind: str, order: int, heading: str, what: str) -> Section:
    """The section of one kind of pair: `layers_<kind>.csv` (every pair and layer),
    `layers_<kind>_summary.csv`, for seeds `layers_seeds_claim.csv`, and the heatmap."""
    name = f"layers_{kind}"

    def tables(record: StudyRecord) -> Tables:
        if layer_pairs.kept(record).empty:
            return {}
        rows = named_rows(record, kind)
        if rows.empty:
            return {}
        out = {name: rows[["kind", "group", "pair", *layer_pairs.COLUMNS[1:]]],
               f"{name}_summary": summary(rows)}  # fmt: skip
        if kind == "seeds":
            out[f"{name}_claim"] = low_vs_last(rows)
        return out

    def figures(record: StudyRecord, own: Tables, folder: Path) -> dict[str, Path]:
        if name not in own:
            return {}
        title = f"{record.name}: {heading}\n(one row per pair; bright = alike)"
        path = heatmap(own[name], title, folder / f"{name}.png")
        return {name: path} if path else {}

    def markdown(record: StudyRecord, own: Tables) -> str:
        if name not in own:
            return kept_line(record) if kind == "seeds" else ""
        described = kind != "seeds" and not named_rows(record, "seeds").empty
        how = SAME_MEASURES if described else f"{kept_line(record)} {INTRO}"
        parts = [f"### {heading}", "", f"{what} {how} `{name}.csv` has every pair and layer, "
                 f"`{name}_summary.csv` the tables below.", "",
                 summary_markdown(own[f"{name}_summary"])]  # fmt: skip
        claim = own.get(f"{name}_claim")
        if claim is not None and not claim.empty:
            parts += ["", CLAIM, "", claim_markdown(claim)]
        return "\n".join(parts)

    caption = (
        f"{heading}: pair x layer heatmaps of CKA, SVCCA distance and attention JS "
        "(bright = alike)."
    )
    return Section(name=name, slot="followups", order=order, tables=tables,
                   markdown=markdown, figures=figures, captions={name: caption})  # fmt: skip


SAME_MEASURES = (
    "Fingerprints and measures as across seeds above (CKA and SVCCA distance per hidden "
    "state, attention JS per block); mean ± sd over the seeds both arms ran (n)."
)
CLAIM = (
    "Are the low layers more alike across seeds than the last? Per seed pair, the first "
    "block's layer against the arm's last one (similarity of the low layer minus that of the "
    "last; for a distance, the last one's minus the low one's: positive = the low layer is "
    "more alike). Seed pairs share seeds and are not independent, so the interval is the "
    "jackknife over seeds (leave one seed out; Student's t with seeds − 1 degrees of freedom), "
    "not a t interval over the pairs."
)
