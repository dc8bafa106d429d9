"""Layers across data: how far the layers of models trained on different data drift apart
(Hao et al.: the last layers diverge more as the datasets grow apart), at the same seed.
Made by study/report/layer_views.py."""

from __future__ import annotations

from study.report.layer_views import layer_section

SECTION = layer_section(
    "data",
    42,
    "Layers across data: arms that learn from different data, at the same seed",
    "Arms that differ only in the data they learn from (the data fraction, or the "
    "intermediate stages before the target), at every seed both ran: how far the layers "
    "drift apart as the data does.",
)
