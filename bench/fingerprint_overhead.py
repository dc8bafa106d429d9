"""What does keeping a layer fingerprint cost a trial? The same trial, side by side in one run:
once with `fingerprint: off`, once with the default (the final encoder's hidden states and
attention maps on the 64-window dynamics sample, half precision, written with the final
state). Both measure layer dynamics, as a study's trials do.

The trial is a default-profile `ner_depth` trial (embedded MiniLM + WNUT-16, full encoder,
all the data, 3 epochs, batch 16, an evaluation every 53 steps), saving its state at every
evaluation as a study's trial does (`--checkpoint-dir`). Prints both wall times, their ratio
(target <= 1.05), the trial's own `fingerprint_s` (taking it) and the fingerprint's size. Each
trial runs in a fresh process so neither inherits the other's warm caches; `--rounds 2`
runs off, on, on, off to see the machine's drift.

    ./with-venv python bench/fingerprint_overhead.py [--threads 2] [--epochs 3] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from support import trial_machine_line

REPO = Path(__file__).resolve().parent.parent


def trial_config(fingerprint: bool, threads: int, epochs: int) -> dict:
    study = yaml.safe_load((REPO / "search_spaces" / "ner_depth.yaml").read_text())
    default = study["profiles"]["default"]
    return {
        "model": study["model"],
        "data": study["data"],
        **study["fixed"],
        **default["fixed"],
        "epochs": epochs,
        "lr": 1e-4,
        "seed": 2,
        "threads": threads,
        "fingerprint": fingerprint,
    }


def run_trial(config: dict, folder: Path, name: str) -> tuple[float, float, dict, int]:
    """Wall and CPU seconds (user + system: what the wall time would be on an idle machine
    when others share this one), the final metrics and the bytes of the fingerprint file."""
    path, out, state = folder / f"{name}.yaml", folder / f"{name}.json", folder / name
    path.write_text(yaml.safe_dump(config))
    started, before = time.perf_counter(), _children_cpu()
    subprocess.run(
        [sys.executable, "-m", "trainables", "--config", str(path), "--metrics-out", str(out),
         "--checkpoint-dir", str(state)],
        cwd=REPO, check=True, capture_output=True,
    )  # fmt: skip
    wall, cpu = time.perf_counter() - started, _children_cpu() - before
    written = state / "fingerprint.safetensors"
    size = written.stat().st_size if written.exists() else 0
    return wall, cpu, json.loads(out.read_text().splitlines()[-1]), size


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1, help="2: off, on, on, off")
    args = parser.parse_args()
    order = [False, True] + ([True, False] if args.rounds > 1 else [])
    print(trial_machine_line(trial_config(False, args.threads, args.epochs)), flush=True)
    walls: dict[bool, list[float]] = {False: [], True: []}
    cpus: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i, on in enumerate(order):
            wall, cpu, metrics, size = run_trial(
                trial_config(on, args.threads, args.epochs), Path(tmp), f"trial{i}"
            )
            walls[on].append(round(wall, 1))
            cpus[on].append(round(cpu, 1))
            if on:
                kept = metrics
                kept["file_bytes"] = size
    off, on = sum(walls[False]) / len(walls[False]), sum(walls[True]) / len(walls[True])
    cpu_off, cpu_on = sum(cpus[False]) / len(cpus[False]), sum(cpus[True]) / len(cpus[True])
    print(f"trial without fingerprint: {off:7.1f} s wall, {cpu_off:7.1f} s CPU "
          f"(each: {walls[False]}, {cpus[False]})")  # fmt: skip
    print(f"trial with fingerprint:    {on:7.1f} s wall, {cpu_on:7.1f} s CPU "
          f"(each: {walls[True]}, {cpus[True]})")  # fmt: skip
    print(f"fingerprint: {kept['fingerprint_bytes'] / 1e6:.2f} MB of arrays, "
          f"{kept['file_bytes'] / 1e6:.2f} MB file, {int(kept['fingerprint_sentences'])} "
          f"sentences; taking it: fingerprint_s {kept['fingerprint_s']:.2f} s")  # fmt: skip
    print(f"ratio with/without: {on / off:.3f} wall, {cpu_on / cpu_off:.3f} CPU (target "
          f"<= 1.05); fingerprint_s / trial wall: {kept['fingerprint_s'] / on:.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
