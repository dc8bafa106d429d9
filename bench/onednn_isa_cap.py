"""What a cap on oneDNN's instruction sets does to bf16 matmuls, and what `precision: auto`
makes of it, side by side on one CPU.

oneDNN runs torch's bf16 matmuls on a CPU. An environment may cap the instructions it uses
(`ONEDNN_MAX_CPU_ISA`, to act out an older CPU or to make results comparable across a
cluster), and /proc/cpuinfo still shows the CPU's own bf16 flags. Below AVX512_CORE_BF16 the
bf16 matmuls fall back to slower code; `auto` must then choose fp32
(trainables/settings/precision.py). Each cap runs in a process of its own (oneDNN reads it
once per process): square matmuls of `--size` at `--threads`, fp32 and bf16, after warm-up;
2·n³ FLOPs each. Beside the rates, what the driver (/proc/cpuinfo and the cap) and a trial's
process (torch and the cap) resolve `auto` to. The caps alternate over `--rounds`; medians.
"AVX2 throughout" also caps torch's own kernels and MKL's, the set used to act out a CPU
without AVX-512.

    ./with-venv python bench/onednn_isa_cap.py [--rounds 3] [--size 1024] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from support import machine_line

REPO = Path(__file__).resolve().parent.parent
CAPS = {  # row: the environment it adds
    "no cap": {},
    "ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"},
    "ONEDNN_MAX_CPU_ISA=AVX512_CORE": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
    "ONEDNN_MAX_CPU_ISA=AVX2": {"ONEDNN_MAX_CPU_ISA": "AVX2"},
    "AVX2 throughout": {
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    },
}
CAP_ENVS = sorted({name for env in CAPS.values() for name in env})


def rates(size: int, threads: int, repeats: int) -> dict:
    """GFLOP/s of fp32 and bf16 square matmuls in this process, and `auto` as both readers
    resolve it here."""
    import torch

    from trainables.model.device import trial_precision
    from trainables.settings.precision import host_has_native_bf16, resolve_precision

    torch.set_num_threads(threads)
    out = {"driver auto": resolve_precision("auto", cuda=False, native_bf16=host_has_native_bf16()),
           "trial auto": trial_precision(torch.device("cpu"), "auto")}  # fmt: skip
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
        for _ in range(2):
            a @ b
        started = time.perf_counter()
        for _ in range(repeats):
            a @ b
        elapsed = time.perf_counter() - started
        out[str(dtype).removeprefix("torch.")] = 2 * size**3 * repeats / elapsed / 1e9
    return out


def measure(cap: str, args: argparse.Namespace) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CAP_ENVS} | CAPS[cap]
    command = [sys.executable, __file__, "--cap", cap, "--size", str(args.size),
               "--threads", str(args.threads), "--repeats", str(args.repeats)]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--cap", choices=CAPS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cap:
        print(json.dumps(rates(args.size, args.threads, args.repeats)))
        return
    print(machine_line("fp32 and bf16 matmuls, as each row says"))
    runs: dict[str, list[dict]] = {cap: [] for cap in CAPS}
    for round_ in range(args.rounds):
        for cap in CAPS if round_ % 2 == 0 else reversed(CAPS):
            runs[cap].append(measure(cap, args))
            got = runs[cap][-1]
            print(f"round {round_}: {cap}: fp32 {got['float32']:.1f}, bf16 "
                  f"{got['bfloat16']:.1f} GFLOP/s", flush=True)  # fmt: skip
    print(f"{args.size}² matmuls, {args.threads} thread(s), {args.repeats} each, "
          f"{args.rounds} rounds, medians:")  # fmt: skip
    print(f"  {'cap':38s} {'fp32':>8s} {'bf16':>8s}  bf16/fp32  auto (driver, trial)")
    for cap, found in runs.items():
        fp32 = statistics.median(r["float32"] for r in found)
        bf16 = statistics.median(r["bfloat16"] for r in found)
        auto = f"{found[0]['driver auto']}, {found[0]['trial auto']}"
        print(f"  {cap:38s} {fp32:8.1f} {bf16:8.1f}  {bf16 / fp32:9.2f}  {auto}")


if __name__ == "__main__":
    main()
