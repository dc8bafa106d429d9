"""How much of this CPU's matmul throughput does the training loop turn into training?

A MiniLM tagger step on CPU is, in FLOPs, almost nothing but matrix products. So the ceiling for
the loop is the machine's own dense float32 matmul rate at the same thread count, and the gap
between the two is overhead that could be removed (padding, optimizer work on embedding tables,
element-wise ops, Python). Both are measured side by side in one run, at each thread count;
target: training GFLOP/s on real tokens >= 0.50 x the square-matmul GFLOP/s.

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
           measured rows per step (batch x padded width), after warm-up; 2·m·k·n FLOPs each
  profile  `Trial.run()` to its first evaluation with every phase of a step timed (what share
           lies outside forward/backward/optimizer), then torch.profiler's top ops

With --thp the train part runs once more per thread count with THP_MEM_ALLOC_ENABLE=1 (torch
then backs tensors of 2 MB and more with transparent huge pages): the dense gradient of the
word-embedding table (30522 x 384, 47 MB) is allocated afresh at every backward and freed by
`zero_grad(set_to_none=True)`, so each step page-faults it in again; the row shows that cost.

    ./with-venv python bench/cpu_utilisation.py [--steps 50] [--threads 1 2] [--batch-size 16]
                                                [--thp]
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
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PARTS = ("train", "matmul", "profile")
SQUARE_SIZES = (1024, 2048)
THP = "THP_MEM_ALLOC_ENABLE"  # torch: back tensors of >= 2 MB with transparent huge pages


# --- train: FLOP/s of the real step -------------------------------------------------------
def make_trial(args, threads: int, steps: int):
    from trainables.config import TrialConfig
    from trainables.train import Trial

    config = {
        "batch_size": args.batch_size, "lr": 5e-5, "seed": 0, "threads": threads,
        "max_steps": steps, "epochs": 50, "eval_every": 10**9, "dynamics": "off",
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

    from trainables import surgery

    trial = make_trial(args, threads, args.warmup + args.steps)
    stream = _steps(trial, args.warmup + args.steps)
    for batch_ids in itertools.islice(stream, args.warmup):
        trial._train_step(batch_ids)
    totals = defaultdict(float)
    for batch_ids in stream:
        widths = [len(trial.train_split.windows[i]) for i in batch_ids]
        started = time.perf_counter()
        _, real = trial._train_step(batch_ids)
        totals["seconds"] += time.perf_counter() - started
        totals["real_tokens"] += real
        totals["padded_tokens"] += max(widths) * len(widths)
        totals["real_square"] += sum(w * w for w in widths)
        totals["padded_square"] += max(widths) ** 2 * len(widths)
    encoder = trial.model.encoder
    return {
        **totals,
        **parameter_counts(trial.model),
        "steps": args.steps,
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
def matmul_rate(m: int, k: int, n: int, seconds: float) -> tuple[float, float]:
    """GFLOP/s of an (m, k) x (k, n) float32 product, repeated for about `seconds` after warm-up;
    returns (GFLOP/s, seconds per product)."""
    import torch

    a, b, out = torch.randn(m, k), torch.randn(k, n), torch.empty(m, n)
    for _ in range(3):
        torch.matmul(a, b, out=out)
    reps, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds or reps < 3:
        torch.matmul(a, b, out=out)
        reps += 1
    return 2 * m * k * n * reps / elapsed / 1e9, elapsed / reps


def measure_matmul(args, threads: int) -> dict:
    """Square products, then one layer's forward mix at the training shapes (q, k, v and attention
    output h x h, feed-forward in h x 4h and out 4h x h), FLOP-weighted into one rate."""
    import torch

    torch.set_num_threads(threads)
    out = {f"square_{n}": matmul_rate(n, n, n, args.matmul_seconds)[0] for n in SQUARE_SIZES}
    rows, h, ffn = args.rows, args.hidden, args.intermediate
    mix = [
        ("h x h", (rows, h, h), 4),
        ("ffn in", (rows, h, ffn), 1),
        ("ffn out", (rows, ffn, h), 1),
    ]
    flops = seconds = 0.0
    for name, (m, k, n), count in mix:
        rate, per_product = matmul_rate(m, k, n, args.matmul_seconds)
        out[f"shape {name} ({m}x{k})x({k}x{n})"] = rate
        flops, seconds = flops + count * 2 * m * k * n, seconds + count * per_product
    out["model_mix"] = flops / seconds / 1e9
    return out


# --- profile: where the rest of the step goes ----------------------------------------------
class Phases:
    """Wall seconds per named phase, collected by wrapping the callables a step goes through."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def wrap(self, name: str, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started

        return timed


class _FirstEvaluation(Exception):
    """Raised in place of the dev evaluation: the steps before it are what is measured."""


def timed_loop(trial, phases: Phases) -> float:
    """Seconds of `Trial.run()` up to its first evaluation, with its phases wrapped. Patches only
    this process's objects: the module-level names train.py looks up at call time, the trial's
    own methods, and `Tensor.backward` (restored afterwards)."""
    import torch

    from trainables import train

    def first_evaluation(**_options):
        raise _FirstEvaluation

    model, optimizer = trial.model, trial.optimizer
    model.forward = phases.wrap("forward + loss", model.forward)
    optimizer.step = phases.wrap("optimizer step (AdamW)", optimizer.step)
    optimizer.zero_grad = phases.wrap("zero_grad", optimizer.zero_grad)
    trial.scheduler.step = phases.wrap("lr scheduler", trial.scheduler.step)
    trial._batches_of_epoch = phases.wrap("batch order", trial._batches_of_epoch)
    trial._evaluate_dev = first_evaluation
    saved = train.collate, torch.nn.utils.clip_grad_norm_, torch.Tensor.backward
    train.collate = phases.wrap("collate (pad, to tensors)", train.collate)
    torch.nn.utils.clip_grad_norm_ = phases.wrap("clip grad norm", saved[1])
    torch.Tensor.backward = phases.wrap("backward", saved[2])
    started = time.perf_counter()
    try:
        next(trial.run())
    except _FirstEvaluation:
        pass
    finally:
        train.collate, torch.nn.utils.clip_grad_norm_, torch.Tensor.backward = saved
    return time.perf_counter() - started


def top_ops(trial, steps: int, limit: int) -> list[dict]:
    """torch.profiler over `steps` more steps, ops ranked by self CPU time."""
    from torch.profiler import ProfilerActivity, profile

    batches = trial._batches_of_epoch()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch_ids in batches[:steps]:
            trial._train_step(batch_ids)
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events)
    return [
        {
            "op": e.key,
            "ms_per_step": e.self_cpu_time_total / 1e3 / steps,
            "share": e.self_cpu_time_total / total,
            "calls_per_step": e.count / steps,
        }
        for e in events[:limit]
    ]


def measure_profile(args, threads: int) -> dict:
    from trainables import train

    encode_seconds = {"s": 0.0}
    original_encode = train.encode

    def timed_encode(*a, **k):
        started = time.perf_counter()
        try:
            return original_encode(*a, **k)
        finally:
            encode_seconds["s"] += time.perf_counter() - started

    train.encode = timed_encode
    started = time.perf_counter()
    trial = make_trial(args, threads, args.profile_steps)
    init = time.perf_counter() - started
    train.encode = original_encode
    for batch_ids in trial._batches_of_epoch()[-args.warmup :]:
        trial._train_step(batch_ids)  # warm-up on batches the timed steps do not reach first
    phases = Phases()
    loop = timed_loop(trial, phases)
    return {
        "steps": args.profile_steps,
        "loop_seconds": loop,
        "phases": dict(phases.seconds),
        "init_seconds": init,
        "tokenise_seconds": encode_seconds["s"],
        "top_ops": top_ops(trial, args.profiler_steps, args.top),
    }


# --- the parent: run the parts, print side by side ----------------------------------------
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


def print_utilisation(rows: dict[int, tuple[dict, dict]], args) -> None:
    first = next(iter(rows.values()))[0]
    print(f"CPU utilisation of the training loop: MiniLM on WNUT-16, batch {args.batch_size}, "
          f"{args.steps} timed steps after {args.warmup} warm-up steps")  # fmt: skip
    print(f"trainable parameters {first['params'] / 1e6:.2f}M, outside embedding tables "
          f"{first['params_non_embedding'] / 1e6:.2f}M = N in 6·N·tokens")  # fmt: skip
    print(f"{'threads':>7}{'matmul sq':>11}{'model mix':>11}{'train real':>12}"
          f"{'train padded':>14}{'real/sq':>9}{'padded/sq':>11}{'real/mix':>10}   GFLOP/s; "
          "target real/sq >= 0.50")  # fmt: skip
    for threads, (train, matmul) in rows.items():
        flops = training_flops(train)
        peak = max(matmul[f"square_{n}"] for n in SQUARE_SIZES)
        real = flops["real"] / train["seconds"] / 1e9
        padded = flops["padded"] / train["seconds"] / 1e9
        print(f"{threads:>7}{peak:>11.1f}{matmul['model_mix']:>11.1f}{real:>12.1f}"
              f"{padded:>14.1f}{real / peak:>9.2f}{padded / peak:>11.2f}"
              f"{real / matmul['model_mix']:>10.2f}")  # fmt: skip
    for threads, (_, matmul) in rows.items():
        detail = ", ".join(f"{k} {v:.1f}" for k, v in matmul.items() if k != "model_mix")
        print(f"  matmul GFLOP/s at {threads} thread(s): {detail}")
    flops = training_flops(first)
    print(
        f"padding: {1 - first['real_tokens'] / first['padded_tokens']:.1%} of computed tokens; "
        f"step {first['seconds'] / first['steps'] * 1e3:.0f} ms at {next(iter(rows))} "
        f"thread(s), {first['padded_tokens'] / first['steps']:.0f} padded tokens per step"
    )
    print(f"attention scores (not counted above) would add "
          f"{flops['attention_real'] / flops['real']:.1%} (real) / "
          f"{flops['attention_padded'] / flops['padded']:.1%} (padded)")  # fmt: skip


def print_thp(rows: dict[int, tuple[dict, dict]], thp: dict[int, dict]) -> None:
    for threads, with_thp in thp.items():
        train = rows[threads][0]
        plain, huge = (r["seconds"] / r["steps"] * 1e3 for r in (train, with_thp))
        print(f"THP_MEM_ALLOC_ENABLE=1 at {threads} thread(s): {huge:.0f} ms per step vs "
              f"{plain:.0f} ms without ({plain / huge:.2f}x)")  # fmt: skip


def print_profile(p: dict, threads: int) -> None:
    steps, loop = p["steps"], p["loop_seconds"]
    phases = dict(p["phases"])
    phases["other (python, loss.item, bookkeeping)"] = loop - sum(phases.values())
    print(f"\nwhere a step goes: Trial.run() for {steps} steps at {threads} thread(s), "
          f"{loop / steps * 1e3:.0f} ms per step")  # fmt: skip
    for name, seconds in sorted(phases.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<40}{seconds / steps * 1e3:>8.1f} ms{seconds / loop:>8.1%}")
    core = ("forward + loss", "backward", "optimizer step (AdamW)")
    outside = loop - sum(phases.get(k, 0.0) for k in core)
    print(f"  outside forward/backward/optimizer: {outside / loop:.1%} of the step")
    print(
        f"  tokenisation: none in the loop (windows are encoded once at trial start: "
        f"{p['tokenise_seconds']:.1f} s of {p['init_seconds']:.1f} s start-up)"
    )
    print("top ops by self CPU time (torch.profiler):")
    for op in p["top_ops"]:
        print(f"  {op['op'][:48]:<50}{op['ms_per_step']:>8.1f} ms/step{op['share']:>8.1%}"
              f"{op['calls_per_step']:>7.0f} calls/step")  # fmt: skip


def parent(args) -> None:
    rows: dict[int, tuple[dict, dict]] = {}
    thp: dict[int, dict] = {}
    for threads in args.threads:
        train = run_part("train", threads, args)
        rows_per_step = round(train["padded_tokens"] / train["steps"])
        shape = ["--rows", str(rows_per_step), "--hidden", str(train["hidden"]),
                 "--intermediate", str(train["intermediate"])]  # fmt: skip
        rows[threads] = (train, run_part("matmul", threads, args, shape))
        if args.thp:
            thp[threads] = run_part("train", threads, args, env={THP: "1"})
    print_utilisation(rows, args)
    print_thp(rows, thp)
    threads = max(args.threads)
    print_profile(run_part("profile", threads, args), threads)


def child(args) -> None:
    threads = args.threads[0]
    measure = {"train": measure_train, "matmul": measure_matmul, "profile": measure_profile}
    print("RESULT " + json.dumps(measure[args.part](args, threads)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=PARTS, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=50, help="timed training steps")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
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
    sys.path.insert(0, str(REPO))
    child(args) if args.part else parent(args)


if __name__ == "__main__":
    main()
