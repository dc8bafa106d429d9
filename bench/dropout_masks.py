"""One dropout of a MiniLM hidden state (batch 16 x 40 tokens x 384), forward and backward, three
ways side by side: torch's `F.dropout`; trainables/model/dropout.py's `mask_dropout` as it
is, whose keep mask becomes its dtype through its bytes (`mask_values`); and the same with
the mask converted as a bool tensor, as that module did before.

    ./with-venv python bench/dropout_masks.py                 # bf16, 1 thread, 9 rounds
    ./with-venv python bench/dropout_masks.py --precision fp32 --threads 2

A bf16 MiniLM step draws 20 such masks (14 on hidden states, 6 on attention probabilities),
so a row's difference times about 20 is what a step gains. The two `mask_dropout` variants
give the same values bit for bit (tests/trainables/model/test_dropout.py); torch's draws other
masks from the same generator. Each round times every variant, in an order that alternates
between rounds, on CPU time; the table gives medians over rounds and ratios to torch's.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from support import machine_line

SHAPE = (16, 40, 384)
P = 0.1  # MiniLM's hidden and attention dropout


def variants() -> dict[str, Callable]:
    import torch.nn.functional as F

    from trainables.model import dropout

    def bool_conversion(x):
        keep = dropout.keep_mask(x.shape, P, x.device)
        return x * keep.to(x.dtype).div_(1.0 - P)

    return {
        "torch F.dropout": lambda x: F.dropout(x, P, True),
        "mask_dropout": lambda x: dropout.mask_dropout(x, P, True),
        "mask as bool": bool_conversion,
    }


def cpu_ms(run: Callable, x, repeats: int) -> float:
    """Median CPU milliseconds of `repeats` forward + backward passes."""
    taken = []
    for _ in range(repeats):
        started = time.process_time()
        run(x).sum().backward()
        taken.append(time.process_time() - started)
        x.grad = None
    return statistics.median(taken) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--repeats", type=int, default=50, help="passes per variant and round")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    print(machine_line(args.precision))
    shape = " x ".join(map(str, SHAPE))
    print(f"dropout p={P} of {shape} {args.precision}, forward + backward; {args.threads} "
          f"thread(s), {args.rounds} rounds x {args.repeats} passes per variant")  # fmt: skip
    x = torch.randn(SHAPE).to(dtype).requires_grad_()
    runs = variants()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(args.rounds):
        for name, run in list(runs.items())[:: 1 if round_ % 2 == 0 else -1]:
            times[name].append(cpu_ms(run, x, args.repeats))
    base = statistics.median(times["torch F.dropout"])
    print(f"\n{'variant':<16} {'CPU ms':>8} {'/ torch':>8}")
    for name, taken in times.items():
        ms = statistics.median(taken)
        print(f"{name:<16} {ms:>8.3f} {ms / base:>7.2f}x")


if __name__ == "__main__":
    main()
