"""How long does the report of a default-size study take, cross-trial layer sections included?
Target: within 60 s on 2 cores, for each of the default studies.

The store is SYNTHETIC (bench/layer_store.py): the shape of each study's default profile (its
arms, its confirm seeds, a dev-F1 history and layer dynamics per trial) written into a fresh
sqlite MLflow store, and per confirm trial a fingerprint artifact of the real size: the
pretrained MiniLM's fingerprint on the default dynamics sample (the first 64 WNUT-16 dev
windows), perturbed per arm and seed. Only the timing means anything here, never the numbers
in the report. Each report is `python -m study.report` in a fresh process, as a user runs it
(it only reads MLflow); once with fingerprints and once on the same shape without them, so
the difference is what the layer sections cost.

    ./with-venv python bench/layer_report.py [--studies ner_depth ner_reinit]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import layer_store
from support import NO_TRAINING, machine_line

REPO = Path(__file__).resolve().parent.parent

# each default profile's arms (resolved factors, as the arm runs record them), confirm seeds
# and compare baseline
STUDIES = {
    "ner_depth": ([{"depth": d, "data_fraction": 1.0} for d in (6, 5)], [2, 3, 4, 5, 6], None),
    "ner_reinit": (
        [{"reinit_from": k, "data_fraction": f} for k in (4, 5, 6) for f in (0.5, 1.0)],
        [0, 1, 2, 3],
        {"reinit_from": 6},
    ),
}


def minilm_fingerprint():
    """The pretrained MiniLM's fingerprint on the dynamics sample of a default trial."""
    from trainables.data.encoding import encode
    from trainables.data.sources import load_checked_splits
    from trainables.measures import dynamics
    from trainables.measures.fingerprints.capture import capture
    from trainables.model.tagger import load_encoder
    from trainables.settings.config import TrialConfig

    cfg = TrialConfig()
    splits, label_map = load_checked_splits(cfg.data)
    encoder, tokenizer = load_encoder(cfg.model)
    dev = encode(splits.dev, tokenizer, label_map, max_length=cfg.max_length,
                 label_all_subwords=cfg.label_all_subwords)  # fmt: skip
    sample = dynamics.dev_sample(dev, tokenizer.pad_token_id, cfg.dynamics_sentences)
    return capture(encoder, sample, model=cfg.model)


def timed_report(uri: str, study: str, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one `python -m study.report`. The CPU time
    says what the wall time would be on an idle machine when others share this one."""
    started, before = time.perf_counter(), _children_cpu()
    done = subprocess.run(
        [sys.executable, "-m", "study.report", study, "--tracking-uri", uri, "--out", str(out)],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return time.perf_counter() - started, _children_cpu() - before


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--studies", nargs="+", default=list(STUDIES), choices=list(STUDIES))
    args = parser.parse_args()
    print(machine_line(NO_TRAINING))
    base = minilm_fingerprint()
    print(f"MiniLM fingerprint on the default sample: {base.nbytes / 1e6:.2f} MB, "
          f"{base.sentences} sentences, {int(base.lengths.sum())} tokens")  # fmt: skip
    for study in args.studies:
        arms, seeds, baseline = STUDIES[study]
        with tempfile.TemporaryDirectory() as tmp:
            uri = f"sqlite:///{tmp}/mlflow.db"

            def make(index, factors, seed):
                blocks = factors.get("depth", base.blocks)
                return layer_store.perturbed(base, 100 * index + seed, 0.3, blocks)

            layer_store.write_layer_study(uri, study, arms, seeds, make, baseline)
            layer_store.write_layer_study(
                uri, f"{study}_bare", arms, seeds, lambda *_: None, baseline
            )
            (wall, cpu), (bare_wall, bare_cpu) = (
                timed_report(uri, study, Path(tmp) / "with"),
                timed_report(uri, f"{study}_bare", Path(tmp) / "without"),
            )
        trials = len(arms) * len(seeds)
        print(f"{study} (synthetic store, {len(arms)} arms x {len(seeds)} confirm seeds = "
              f"{trials} fingerprints): report {wall:.1f} s wall, {cpu:.1f} s CPU (target "
              f"<= 60 s on 2 cores); without fingerprints {bare_wall:.1f} s wall, "
              f"{bare_cpu:.1f} s CPU; the layer sections {wall - bare_wall:.1f} s wall, "
              f"{cpu - bare_cpu:.1f} s CPU")  # fmt: skip


if __name__ == "__main__":
    main()
