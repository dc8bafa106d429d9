"""A study written into a real MLflow store by hand, whose confirm trials carry layer
fingerprints as artifacts: for the report's cross-trial layer sections (tests) and for timing
a report over a study of the default size (bench/layer_report.py).

The fingerprints are SYNTHETIC: one real fingerprint, perturbed per arm and seed with noise
that grows with the layer. The numbers a report makes of them are no finding; only the shapes
(layers, heads, tokens, bytes) are those of the real encoder the base came from.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from mlflow.entities import Metric

from study.names import FINGERPRINT_ARTIFACT
from study.tracking.store import StudyTracker
from trainables.measures.fingerprints import FILE_NAME, LayerFingerprint

# a fingerprint per (arm index, arm factors, seed), or None for a trial that kept none
Fingerprints = Callable[[int, dict[str, Any], int], LayerFingerprint | None]


def perturbed(base: LayerFingerprint, seed: int, drift: float, blocks: int | None = None):
    """`base` with its first `blocks` blocks, every layer moved by noise of `drift` times the
    layer's spread x (layer / blocks): the top layers move most, the same seed moves alike."""
    blocks = base.blocks if blocks is None else blocks
    rng = np.random.default_rng(seed)
    hidden = []
    for i in range(blocks + 1):
        state = base.hidden_state(i).astype(np.float32)
        hidden.append(state + rng.normal(0, drift * i / blocks * state.std(), state.shape))
    attention = []
    for i in range(blocks):
        maps = base.attention_maps(i).astype(np.float32)
        attention.append(maps * np.exp(rng.normal(0, drift * (i + 1) / blocks, maps.shape)))
    meta = {k: v for k, v in base.meta.items() if k in ("model", "sample_sentences")}
    return LayerFingerprint.from_arrays(hidden, attention, base.lengths, base.input_ids, meta)


def write_layer_study(
    uri: str,
    name: str,
    arms: Sequence[dict[str, Any]],
    seeds: Sequence[int],
    fingerprint: Fingerprints,
    baseline: dict[str, Any] | None = None,
    evaluations: int = 6,
) -> str:
    """A finished study: one arm run per factor dict, one completed confirm trial run per arm
    and seed with final metrics, a dev-F1 history of `evaluations` points, per-layer dynamics
    and, where `fingerprint` gives one, its fingerprint artifact. Returns the study run id."""
    tracker = StudyTracker(uri, name)
    tags = {"state": "finished", "profile": "default"}
    if baseline is not None:
        tags["compare_baseline"] = json.dumps(baseline)
    plan = {"description": "synthetic", "search": {}, "metric": {"name": "dev_f1"}}
    study_run = tracker.study_run("synthetic", name, tags, {"plan": json.dumps(plan)})
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        for index, factors in enumerate(arms):
            arm = ",".join(f"{k}={v}" for k, v in factors.items())
            arm_run = tracker.arm_run(study_run, arm, factors)
            for seed in seeds:
                run = tracker.trial_run(study_run, arm_run, f"confirm/{arm}/sample0/seed{seed}",
                                        {"arm": arm, "phase": "confirm", "sample": "0",
                                         "seed": str(seed), "status": "completed"})  # fmt: skip
                tracker.log_params(run, {**factors, "arm_index": index})
                kept = fingerprint(index, factors, seed)
                _log_trial(tracker, run, kept, rng, evaluations)
                if kept is not None:
                    path = Path(folder) / run / FILE_NAME
                    path.parent.mkdir()
                    kept.save(path)
                    tracker.client.log_artifact(run, str(path), FINGERPRINT_ARTIFACT)
                tracker.end(run, "FINISHED")
    tracker.end_study(study_run, {}, "FINISHED")
    return study_run


def _log_trial(tracker, run: str, kept, rng, evaluations: int) -> None:
    final = {"final": 1.0, "dev_f1": rng.uniform(0.3, 0.5), "test_f1": rng.uniform(0.3, 0.5),
             "curve_area": rng.uniform(0.2, 0.4), "steps_to_95": 100.0 + evaluations,
             "fingerprint_bytes": float(kept.nbytes if kept else 0),
             "fingerprint_sentences": float(kept.sentences if kept else 0)}  # fmt: skip
    metrics = [Metric(k, v, 0, 10 * evaluations) for k, v in final.items()]
    metrics += [Metric("dev_f1", float(v), 0, 10 * (i + 1))
                for i, v in enumerate(rng.uniform(0, 0.5, evaluations - 1))]  # fmt: skip
    metrics += [Metric(f"dyn_{m}", float(v), 0, layer) for m in ("cka", "svcca", "attn_js")
                for layer, v in enumerate(rng.uniform(0, 1, 7))]  # fmt: skip
    tracker.client.log_batch(run, metrics=metrics)
