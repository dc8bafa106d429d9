"""A MiniLM tagger's training step three ways, side by side: bf16 as trials run it (autocast:
fp32 weights, matmuls and most activations in bf16, casts between), fp32 with oneDNN's
matmuls computing in bf16 (`torch.backends.mkldnn.matmul.fp32_precision = "bf16"`: every
tensor stays fp32 and the matmul kernels round their inputs as they pack them, so autocast's
casts of weights, gradients and activations would go), and plain fp32.

The second is the way to the bf16 matmul peak without autocast's copies, if its matmuls are
as fast; it also keeps the elementwise work (GELU, LayerNorm, softmax, dropout, AdamW's
reads of activations) in fp32, twice the bytes. Each mode runs in a process of its own (the
oneDNN setting is per process), on the loop's own batch order, `--steps` steps after
`--warmup`, at `--threads`; the modes alternate over `--rounds`. Median step times.

    ./with-venv python bench/bf16_matmul_modes.py [--rounds 2] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from support import machine_line

REPO = Path(__file__).resolve().parent.parent
MODES = {  # mode: the trial's precision
    "autocast bf16": "bf16",
    "fp32, oneDNN bf16 matmuls": "fp32",
    "fp32": "fp32",
}


def step_times(mode: str, steps: int, warmup: int, threads: int) -> list[float]:
    """Wall seconds of `steps` training steps in this process, after `warmup` untimed ones."""
    import torch

    from trainables.settings.config import TrialConfig
    from trainables.training.train import Trial

    torch.set_num_threads(threads)
    if mode == "fp32, oneDNN bf16 matmuls":
        torch.backends.mkldnn.matmul.fp32_precision = "bf16"
    settings = {"model": "minilm", "data": {"embedded": "wnut16"}, "lr": 1e-4, "batch_size": 16,
                "epochs": 1, "seed": 0, "threads": threads, "precision": MODES[mode]}  # fmt: skip
    trial = Trial(TrialConfig.from_dict(settings))
    batches = trial._batches_of_epoch()
    for batch in batches[:warmup]:
        trial._train_step(batch)
    times = []
    for batch in batches[warmup : warmup + steps]:
        started = time.perf_counter()
        trial._train_step(batch)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(step_times(args.mode, args.steps, args.warmup, args.threads)))
        return
    print(machine_line("bf16 and fp32, as each row says"))
    medians: dict[str, list[float]] = {mode: [] for mode in MODES}
    for round_ in range(args.rounds):
        order = list(MODES) if round_ % 2 == 0 else list(reversed(MODES))
        for mode in order:
            command = [sys.executable, __file__, "--mode", mode, "--steps", str(args.steps),
                       "--warmup", str(args.warmup), "--threads", str(args.threads)]  # fmt: skip
            done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True)
            times = json.loads(done.stdout.strip().splitlines()[-1])
            medians[mode].append(1000 * statistics.median(times))
            print(f"round {round_}: {mode}: median step {medians[mode][-1]:.1f} ms", flush=True)
    base = statistics.median(medians["autocast bf16"])
    print(f"{args.threads} thread(s), {args.steps} steps after {args.warmup}, "
          f"{args.rounds} rounds:")  # fmt: skip
    for mode, values in medians.items():
        median = statistics.median(values)
        print(f"  {mode:28s} {median:7.1f} ms ({median / base:.2f}x autocast bf16's)")


if __name__ == "__main__":
    main()
