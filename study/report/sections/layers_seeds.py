"""Layers across seeds: how alike two fine-tuned runs of one arm are, layer by layer (Hao et
al.: the low layers of two seeds stay alike, the last ones diverge), and whether the low
layers are more alike than the last. Made by study/report/layer_views.py."""

from __future__ import annotations

from study.report.layer_views import layer_section

SECTION = layer_section(
    "seeds",
    40,
    "Layers across seeds: two seeds of one arm",
    "Every pair of an arm's confirm seeds: how much of each layer two runs that differ only "
    "in their seed share.",
)
