"""Layers across arms: which layers two designs share (full vs full-1, a re-initialised block
vs the pretrained one), fine-tuned model against fine-tuned model at the same seed. Made by
study/report/layer_views.py."""

from __future__ import annotations

from study.report.layer_views import layer_section

SECTION = layer_section(
    "arms",
    41,
    "Layers across arms: two designs at the same seed",
    "The arm pairs the study compares (their verdicts are above), at every seed both ran: "
    "which layers two designs share.",
)
