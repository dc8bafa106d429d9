"""How much of this CPU's matmul throughput does the training loop turn into training?

A MiniLM tagger step on CPU is, in FLOPs, almost nothing but matrix products. So the ceiling for
the loop is the machine's own dense matmul rate in the same precision and at the same thread
count, and the gap between the two is overhead that could be removed (padding, optimizer work on
embedding tables, element-wise ops, Python). Both are measured side by side in one run, per
precision and thread count; target: training GFLOP/s on real tokens >= 0.55 x the square-matmul
GFLOP/s of the precision a trial runs in (`auto`: bf16 on a CPU with native bf16, whose matmuls
run ~4x faster than fp32 ones, so the same step is held to a ~4x higher ceiling).

Training FLOPs use the usual 6·N·T estimate (2 forward + 4 backward FLOPs per parameter and
token), with N = the trainable parameters *outside* embedding matrices: a lookup table does no
multiply-adds (its forward is a gather, its backward a scatter-add into the rows used), so
counting its ~12M entries would credit work that is never done. T is counted twice: real
(non-padding) tokens, the useful work, and padded tokens (batch x widest window), what the
kernels actually compute. Attention scores (QKᵀ and AV: 12·layers·hidden·width² per sequence)
are outside 6·N·T; their share is printed, not added.

Parts, each in its own process so its thread count is set before torch does any work:
  train    `Trial._train_step` on the loop's own batch order (as `run_ours` in
           bench/trainable.py), timed after a few warm-up steps; embedded MiniLM + WNUT-16
  matmul   torch.matmul of square matrices (1024², 2048²) and of the model's own shapes at the
           measured rows per step (batch x padded width), after warm-up; 2·m·k·n FLOPs each,
           in fp32 or bf16 (inputs and output)
  profile  `Trial.run()` to its first evaluation with every phase of a step timed (what share
           lies outside forward/backward/optimizer), then torch.profiler's top ops
           (bench/step_profile.py), in the precision `auto` picks here

Every timing is wall time; beside it each part records the CPU time its process got, and a
`busy` column shows CPU / (wall x threads). Well below 100% means other work shared the cores
and the row's rates are low by about that much: rerun on a quiet machine. The target line also
gives the ratio per CPU-second of each side, which a busy machine distorts far less (at one
thread; at two it also counts the time a thread waits for the other).

With --thp the train part runs once more per row with THP_MEM_ALLOC_ENABLE=1 (torch then backs
tensors of 2 MB and more with transparent huge pages): the dense gradient of the
word-embedding table (30522 x 384, 47 MB) is allocated afresh at every backward and freed by
`zero_grad(set_to_none=True)`, so each step page-faults it in again; the row shows that cost.

    ./with-venv python bench/cpu_utilisation.py [--steps 50] [--threads 1 2] [--batch-size 16]
                                                [--precision fp32 bf16] [--thp]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from step_profile import measure_profile, print_profile
from support import machine_line

REPO = Path(__file__).resolve().parent.parent
PARTS = ("train", "matmul", "profile")
SQUARE_SIZES = (1024, 2048)
TARGET = 0.55  # training real / square matmul, in the precision `auto` picks, at 1 thread
THP = "THP_MEM_ALLOC_ENABLE"  # torch: back tensors of >= 2 MB with transparent huge pages


# --- train: FLOP/s of the real step -------------------------------------------------------
def make_trial(args, threads: int, steps: int):
    from trainables.settings.config import TrialConfig
    from trainables.training.train import Trial

    config = {
        "batch_size": args.batch_size, "lr": 5e-5, "seed": 0, "threads": threads,
        "max_steps": steps, "epochs": 50, "eval_every": 10**9, "dynamics": "off",
        "precision": args.precision[0], "device": "cpu",  # also where a GPU is there
    }  # fmt: skip
    return Trial(TrialConfig.from_dict(config))


def parameter_counts(model) -> dict[str, int]:
    """Trainable parameters, and those outside embedding tables (the N of 6·N·T)."""
    from torch import nn

    tables = {id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()}
    trainable = [p for p in model.parameters() if p.requires_grad]
    return {
        "params": sum(p.numel() for p in trainable),
        "params_non_embedding": sum(p.numel() for p in trainable if id(p) not in tables),
    }


def measure_train(args, threads: int) -> dict:
    from trainable import _steps  # bench/trainable.py: the same batch stream as run_ours

    from trainables.model import surgery

    trial = make_trial(args, threads, args.warmup + args.steps)
    stream = _steps(trial, args.warmup + args.steps)
    for batch_ids in itertools.islice(stream, args.warmup):
        trial._train_step(batch_ids)
    totals = defaultdict(float)
    for batch_ids in stream:
        widths = [len(trial.train_split.windows[i]) for i in batch_ids]
        started, cpu_started = time.perf_counter(), time.process_time()
        _, real = trial._train_step(batch_ids)
        totals["seconds"] += time.perf_counter() - started
        totals["cpu_seconds"] += time.process_time() - cpu_started
        totals["real_tokens"] += real
        totals["padded_tokens"] += max(widths) * len(widths)
        totals["real_square"] += sum(w * w for w in widths)
        totals["padded_square"] += max(widths) ** 2 * len(widths)
    encoder = trial.model.encoder
    return {
        **totals,
        **parameter_counts(trial.model),
        "steps": args.steps,
        "threads": threads,
        "precision": trial.precision,
        "layers": surgery.num_blocks(encoder),
        "hidden": encoder.config.hidden_size,
        "intermediate": encoder.config.intermediate_size,
    }


def training_flops(r: dict) -> dict[str, float]:
    """6·N·T per token count, and attention-score FLOPs (12·L·d·width²) beside it."""
    six_n = 6 * r["params_non_embedding"]
    attention = 12 * r["layers"] * r["hidden"]
    return {
        "real": six_n * r["real_tokens"],
        "padded": six_n * r["padded_tokens"],
        "attention_real": attention * r["real_square"],
        "attention_padded": attention * r["padded_square"],
    }


# --- matmul: the machine's ceiling ---------------------------------------------------------
DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


def matmul_rate(m: int, k: int, n: int, seconds: float, dtype: str) -> tuple[float, float]:
    """GFLOP/s of an (m, k) x (k, n) product in `dtype` (inputs and output), repeated for about
    `seconds` after warm-up; returns (GFLOP/s, seconds per product, GFLOP per CPU-second and
    thread: what a quiet machine would give in wall time)."""
    import torch

    kind = getattr(torch, dtype)
    a, b = torch.randn(m, k).to(kind), torch.randn(k, n).to(kind)
    out = torch.empty(m, n, dtype=kind)
    for _ in range(3):
        torch.matmul(a, b, out=out)
    reps, started, cpu_started = 0, time.perf_counter(), time.process_time()
    while (elapsed := time.perf_counter() - started) < seconds or reps < 3:
        torch.matmul(a, b, out=out)
        reps += 1
    cpu = (time.process_time() - cpu_started) / torch.get_num_threads()
    return 2 * m * k * n * reps / elapsed / 1e9, elapsed / reps, 2 * m * k * n * reps / cpu / 1e9


def measure_matmul(args, threads: int) -> dict:
    """Square products, then one layer's forward mix at the training shapes (q, k, v and attention
    output h x h, feed-forward in h x 4h and out 4h x h), FLOP-weighted into one rate."""
    import torch

    torch.set_num_threads(threads)
    started, cpu_started = time.perf_counter(), time.process_time()
    dtype = DTYPES[args.precision[0]]
    squares = {n: matmul_rate(n, n, n, args.matmul_seconds, dtype) for n in SQUARE_SIZES}
    out = {f"square_{n}": rate for n, (rate, _, _) in squares.items()}
    peak_cpu = max(rate for _, _, rate in squares.values())
    rows, h, ffn = args.rows, args.hidden, args.intermediate
    mix = [
        ("h x h", (rows, h, h), 4),
        ("ffn in", (rows, h, ffn), 1),
        ("ffn out", (rows, ffn, h), 1),
    ]
    flops = seconds = 0.0
    for name, (m, k, n), count in mix:
        rate, per_product, _ = matmul_rate(m, k, n, args.matmul_seconds, dtype)
        out[f"shape {name} ({m}x{k})x({k}x{n})"] = rate
        flops, seconds = flops + count * 2 * m * k * n, seconds + count * per_product
    out["model_mix"] = flops / seconds / 1e9
    wall = time.perf_counter() - started
    busy = (time.process_time() - cpu_started) / (wall * threads)
    return {"rates": out, "busy": busy, "square_per_cpu_second": peak_cpu}


# --- the parent: run the parts, print side by side ----------------------------------------
Row = tuple[str, int]  # (precision, threads)


def run_part(
    part: str, threads: int, args, extra: list[str] | None = None, env: dict | None = None
) -> dict:
    cmd = [sys.executable, __file__, "--part", part, "--threads", str(threads),
           "--steps", str(args.steps), "--batch-size", str(args.batch_size),
           "--warmup", str(args.warmup), "--profile-steps", str(args.profile_steps),
           "--profiler-steps", str(args.profiler_steps), "--top", str(args.top),
           "--matmul-seconds", str(args.matmul_seconds), *(extra or [])]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != THP} | (env or {})
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=REPO, env=env)
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    if out.returncode or not line:
        sys.exit(f"bench: part {part} (threads {threads}) failed:\n{out.stderr[-2000:]}")
    return json.loads(line[-1][len("RESULT ") :])


def busy(train: dict) -> float:
    """CPU time the process got per wall second and thread: ~1.0 on a quiet machine."""
    return train["cpu_seconds"] / (train["seconds"] * train["threads"])


def print_utilisation(rows: dict[Row, tuple[dict, dict]], args) -> None:
    first = next(iter(rows.values()))[0]
    print(f"CPU utilisation of the training loop: MiniLM on WNUT-16, batch {args.batch_size}, "
          f"{args.steps} timed steps after {args.warmup} warm-up steps")  # fmt: skip
    print(f"trainable parameters {first['params'] / 1e6:.2f}M, outside embedding tables "
          f"{first['params_non_embedding'] / 1e6:.2f}M = N in 6·N·tokens")  # fmt: skip
    print(f"{'precision':>9}{'threads':>8}{'step ms':>9}{'matmul sq':>11}{'model mix':>11}"
          f"{'train real':>12}{'train padded':>14}{'real/sq':>9}{'padded/sq':>11}"
          f"{'real/mix':>10}{'busy':>7}   GFLOP/s, matmul in the row's precision")  # fmt: skip
    for (precision, threads), (train, matmul) in rows.items():
        flops, rates = training_flops(train), matmul["rates"]
        peak = max(rates[f"square_{n}"] for n in SQUARE_SIZES)
        real = flops["real"] / train["seconds"] / 1e9
        padded = flops["padded"] / train["seconds"] / 1e9
        step_ms, got = train["seconds"] / train["steps"] * 1e3, min(busy(train), matmul["busy"])
        print(f"{precision:>9}{threads:>8}{step_ms:>9.0f}{peak:>11.1f}{rates['model_mix']:>11.1f}"
              f"{real:>12.1f}{padded:>14.1f}{real / peak:>9.2f}{padded / peak:>11.2f}"
              f"{real / rates['model_mix']:>10.2f}{got:>7.0%}")  # fmt: skip
    for (precision, threads), (_, matmul) in rows.items():
        detail = ", ".join(f"{k} {v:.1f}" for k, v in matmul["rates"].items() if k != "model_mix")
        print(f"  {precision} matmul GFLOP/s at {threads} thread(s): {detail}")
    flops = training_flops(first)
    print(
        f"padding: {1 - first['real_tokens'] / first['padded_tokens']:.1%} of computed tokens; "
        f"{first['padded_tokens'] / first['steps']:.0f} padded tokens per step"
    )
    print(f"attention scores (not counted above) would add "
          f"{flops['attention_real'] / flops['real']:.1%} (real) / "
          f"{flops['attention_padded'] / flops['padded']:.1%} (padded)")  # fmt: skip
    print_precision_gain(rows)
    print_target(rows)


def print_precision_gain(rows: dict[Row, tuple[dict, dict]]) -> None:
    for threads in sorted({t for _, t in rows}):
        if ("fp32", threads) in rows and ("bf16", threads) in rows:
            fp32, bf16 = (rows[(p, threads)][0] for p in ("fp32", "bf16"))
            step = [r["seconds"] / r["steps"] * 1e3 for r in (fp32, bf16)]
            print(f"bf16 step / fp32 step at {threads} thread(s): {step[1]:.0f} vs {step[0]:.0f}"
                  f" ms ({step[0] / step[1]:.2f}x faster)")  # fmt: skip


def print_target(rows: dict[Row, tuple[dict, dict]]) -> None:
    """The target row: the precision `auto` picks here (the first listed, bf16 where native)."""
    auto = "bf16" if any(p == "bf16" for p, _ in rows) else "fp32"
    for (precision, threads), (train, matmul) in rows.items():
        if precision == auto:
            peak = max(matmul["rates"][f"square_{n}"] for n in SQUARE_SIZES)
            real = training_flops(train)["real"] / 1e9
            ratio = real / train["seconds"] / peak
            per_cpu = real / (train["cpu_seconds"] / threads) / matmul["square_per_cpu_second"]
            print(f"target: {auto} training real / {auto} square matmul at {threads} thread(s) = "
                  f"{ratio:.2f} (>= {TARGET}: {'met' if ratio >= TARGET else 'missed'}); "
                  f"per CPU-second of each {per_cpu:.2f}")  # fmt: skip
    quiet = min(min(busy(t), m["busy"]) for t, m in rows.values())
    if quiet < 0.9:
        print(
            f"warning: a part got only {quiet:.0%} of its cores' time: the machine was busy, "
            "so rates are low and ratios noisy; rerun on a quiet machine"
        )


def print_thp(rows: dict[Row, tuple[dict, dict]], thp: dict[Row, dict]) -> None:
    for (precision, threads), with_thp in thp.items():
        train = rows[(precision, threads)][0]
        plain, huge = (r["seconds"] / r["steps"] * 1e3 for r in (train, with_thp))
        print(f"THP_MEM_ALLOC_ENABLE=1, {precision} at {threads} thread(s): {huge:.0f} ms per "
              f"step vs {plain:.0f} ms without ({plain / huge:.2f}x)")  # fmt: skip


def parent(args) -> None:
    print(machine_line(" and ".join(args.precision) + " (a row each; the profile in auto)"))
    rows: dict[Row, tuple[dict, dict]] = {}
    thp: dict[Row, dict] = {}
    for precision in args.precision:
        for threads in args.threads:
            chosen = ["--precision", precision]
            train = run_part("train", threads, args, chosen)
            rows_per_step = round(train["padded_tokens"] / train["steps"])
            shape = ["--rows", str(rows_per_step), "--hidden", str(train["hidden"]),
                     "--intermediate", str(train["intermediate"]), *chosen]  # fmt: skip
            rows[(precision, threads)] = (train, run_part("matmul", threads, args, shape))
            if args.thp:
                thp[(precision, threads)] = run_part("train", threads, args, chosen, {THP: "1"})
    print_utilisation(rows, args)
    print_thp(rows, thp)
    threads = max(args.threads)
    print_profile(run_part("profile", threads, args, ["--precision", "auto"]), threads)


def profile(args, threads: int) -> dict:
    return measure_profile(
        lambda steps: make_trial(args, threads, steps),
        args.profile_steps, args.warmup, args.profiler_steps, args.top,
    )  # fmt: skip


def child(args) -> None:
    threads = args.threads[0]
    measure = {"train": measure_train, "matmul": measure_matmul, "profile": profile}
    print("RESULT " + json.dumps(measure[args.part](args, threads)))


def default_precisions() -> list[str]:
    """fp32, and bf16 beside it where this CPU has native bf16 (what `auto` would pick)."""
    from trainables.settings.precision import host_has_native_bf16

    return ["fp32", "bf16"] if host_has_native_bf16() else ["fp32"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=PARTS, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=50, help="timed training steps")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--precision", nargs="+", choices=("fp32", "bf16", "auto"),
                        help="default: fp32, and bf16 where the CPU has it natively")  # fmt: skip
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--profile-steps", type=int, default=20, help="steps phase-timed")
    parser.add_argument("--profiler-steps", type=int, default=5, help="steps under the profiler")
    parser.add_argument("--top", type=int, default=12, help="ops listed")
    parser.add_argument("--matmul-seconds", type=float, default=1.0, help="per matmul shape")
    parser.add_argument("--thp", action="store_true", help="also time with THP_MEM_ALLOC_ENABLE=1")
    parser.add_argument("--rows", type=int, default=640, help=argparse.SUPPRESS)
    parser.add_argument("--hidden", type=int, default=384, help=argparse.SUPPRESS)
    parser.add_argument("--intermediate", type=int, default=1536, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.precision = args.precision or default_precisions()
    child(args) if args.part else parent(args)


if __name__ == "__main__":
    main()
