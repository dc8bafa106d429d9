"""What does measuring layer dynamics cost a trial? The same trial, side by side in one run:
once with `dynamics: off`, once with `dynamics: end` (the default: weight L2, attention JS,
CKA and SVCCA against a freshly loaded pretrained encoder on the fixed dev sample).

The trial is a default-profile `ner_reinit` trial (embedded MiniLM + WNUT-16, re-initialised
from block 4, full data, 3 epochs, batch 16). Prints both wall times, the ratio (target
<= 1.10) and the trial's own `dynamics_s`. Each trial runs in a fresh process so neither
inherits the other's warm caches.

    ./with-venv python bench/dynamics_overhead.py [--threads 2] [--epochs 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from support import trial_machine_line

REPO = Path(__file__).resolve().parent.parent


def trial_config(dynamics: str, threads: int, epochs: int) -> dict:
    study = yaml.safe_load((REPO / "search_spaces" / "ner_reinit.yaml").read_text())
    return {
        "model": study["model"],
        "data": study["data"],
        **study["fixed"],
        "epochs": epochs,
        "reinit_from": 4,
        "data_fraction": 1.0,
        "seed": 0,
        "threads": threads,
        "dynamics": dynamics,
    }


def run_trial(config: dict, folder: Path) -> tuple[float, dict]:
    path = folder / f"{config['dynamics']}.yaml"
    out = folder / f"{config['dynamics']}.json"
    path.write_text(yaml.safe_dump(config))
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "trainables", "--config", str(path), "--metrics-out",
         str(out)],
        cwd=REPO, check=True, capture_output=True,
    )  # fmt: skip
    return time.perf_counter() - started, json.loads(out.read_text().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    without = trial_config("off", args.threads, args.epochs)
    print(trial_machine_line(without))
    with tempfile.TemporaryDirectory() as tmp:
        off, _ = run_trial(without, Path(tmp))
        on, metrics = run_trial(trial_config("end", args.threads, args.epochs), Path(tmp))
    layers = sum(1 for k in metrics if k.startswith("dyn/l2_sum/"))
    print(f"trial without dynamics: {off:7.1f} s wall")
    print(f"trial with dynamics:    {on:7.1f} s wall ({layers} blocks measured, "
          f"dynamics_s {metrics['dynamics_s']:.1f} s inside the trial)")  # fmt: skip
    print(f"ratio with/without: {on / off:.3f} (target <= 1.10); dynamics_s / trial: "
          f"{metrics['dynamics_s'] / on:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
