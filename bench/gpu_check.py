"""The GPU path, run once on a CUDA machine: a study and a trial on CUDA in bf16, how fast a step
is against the GPU's peak, what memory a trial holds, and how many trials should share a GPU.

Nothing here has run on a GPU before (issue 51, item 5). On a machine without CUDA it says so in
one line and exits 2, before anything else. On one with CUDA, four parts, in order:

  study   `python -m study.run ner_depth --profile smoke --set resources.gpu=G` (G from
          --study-gpu, default 0.25: four trials on one GPU through Ray's fractional
          resources), into a scratch folder. A trial that asks for a GPU trains with
          `device: cuda` (study/plan.py), which refuses to start where torch finds no CUDA, so
          exit 0 means every trial trained on the GPU. Its exit code and wall time.
  trial   one whole default-profile `ner_depth` trial (embedded MiniLM on WNUT-16, depth 6,
          630 optimizer steps, lr 1.78e-4, its evaluations), planned by study.plan from the
          study file with `resources.gpu=1`, so `device: cuda` and bf16 as a cluster trial
          gets them. Its wall time (set-up apart), final dev and test F1 and peak memory.
  steps   the same trial's training steps alone: the first step (CUDA's start-up, kernel
          choice, the allocator's first blocks) and the rest of the first epoch (new padded
          widths, new kernel shapes) timed apart, then steps for --seconds. Step
          time (median), real and padded tokens/s, model FLOP utilisation and peak memory.
          MFU = 6·N·real tokens per second / the GPU's peak dense bf16 FLOP/s, with N the
          trainable parameters outside embedding tables (bench/cpu_utilisation.py's N: a
          lookup is no matmul); the peak from PEAK_BF16_TFLOPS by device name, or
          --peak-tflops.
  share   K such trials at once on the one GPU for each K of --share (default 1 2 4 8), as
          Ray places them with `resources: {gpu: 1/K}`: each in its own process, all
          started together once all are warm, each training for --seconds. Combined real
          tokens/s against one trial alone, each trial's own step time, and the device memory
          in use; the K with the most combined throughput is the `resources.gpu` to use.

Memory: torch's peak allocated and reserved bytes in each trial's process
(`torch.cuda.max_memory_allocated`, `max_memory_reserved`) and the device's memory in use
while the trials ran (`torch.cuda.mem_get_info`, which counts every process and its CUDA
context). Each trial runs --threads CPU threads (Ray's `resources.cpu`).

    python bench/gpu_check.py [--share 1 2 4 8] [--seconds 20] [--threads 2]
                              [--peak-tflops T] [--skip study trial] [--scratch DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SKIPPABLE = ("study", "trial", "share")  # steps is what share's one-trial row reuses
# Peak dense (no 2:4 sparsity) bf16 tensor-core TFLOP/s from the vendor's data sheets, by the
# device name torch reports: (the model's word in the name, a word that must also be there or
# None, peak). First match wins, so a variant comes before its plain model.
PEAK_BF16_TFLOPS: tuple[tuple[str, str | None, float], ...] = (
    ("H200", "NVL", 835.0),
    ("H200", None, 989.0),
    ("H100", "NVL", 835.0),
    ("H100", "PCIe", 756.0),
    ("H100", None, 989.0),  # SXM5
    ("A100", None, 312.0),
    ("L40S", None, 362.0),
    ("L4", None, 121.0),
    ("A10", None, 125.0),
)
READY_TIMEOUT_S = 600.0  # a trial's process imports, loads the model and takes its first step


def peak_bf16_tflops(device_name: str) -> float | None:
    """The table's peak for a device name such as 'NVIDIA H100 80GB HBM3' or
    'NVIDIA A100-SXM4-80GB', matched word by word (an 'A10G' is no 'A10'); None if unknown."""
    words = device_name.replace("-", " ").split()
    for model, variant, tflops in PEAK_BF16_TFLOPS:
        if model in words and (variant is None or variant in words):
            return tflops
    return None


def model_flop_utilisation(params: int, tokens_per_s: float, peak_tflops: float) -> float:
    """6·N·T/s over the peak: 2 FLOPs per parameter and token forward, 4 backward."""
    return 6 * params * tokens_per_s / (peak_tflops * 1e12)


# --- the command line ---------------------------------------------------------------------
def _positive_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number > 0")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= 1")
    return value


def _gpu_share(text: str) -> float:
    value = _positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a share of one GPU, in (0, 1]")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    share = "trials at once on the GPU, one round each (1 is always run)"
    parser.add_argument("--share", type=_positive_int, nargs="+", default=[1, 2, 4, 8], help=share)
    parser.add_argument("--seconds", type=_positive_float, default=20.0,
                        help="how long each trial trains in the steps and share parts")  # fmt: skip
    parser.add_argument("--threads", type=_positive_int, default=2, help="CPU threads a trial")
    peak = "the GPU's peak dense bf16 TFLOP/s (default: from the table)"
    parser.add_argument("--peak-tflops", type=_positive_float, help=peak)
    parser.add_argument("--study-gpu", type=_gpu_share, default=0.25,
                        help="resources.gpu of the smoke study's trials")  # fmt: skip
    parser.add_argument("--skip", nargs="+", choices=SKIPPABLE, default=[], help="parts left out")
    parser.add_argument("--scratch", default="/tmp/ner-depth-gpu-check")
    # a trial's process, started by this script
    parser.add_argument("--child", choices=("trial", "steps"), help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--ready", help=argparse.SUPPRESS)
    parser.add_argument("--go", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.share = sorted(set(args.share) | {1})
    return args


def cuda_refusal() -> str | None:
    """The one line that ends the script where torch finds no CUDA, else None."""
    import torch

    if torch.cuda.is_available():
        return None
    from trainables.model.device import no_cuda_reason

    return (f"gpu_check: no CUDA here: {no_cuda_reason()}; this check waits for a GPU "
            "machine, run `python bench/gpu_check.py` there")  # fmt: skip


# --- a trial's process ----------------------------------------------------------------------
def ner_depth_trial(threads: int) -> dict:
    """The default-profile `ner_depth` trial of depth 6 (its first arm) on seed 200, planned
    as a study on a GPU plans it: `resources.gpu=1` gives `device: cuda` and bf16."""
    from study.plan import make_plan, trial_config
    from study.spec import load_study

    overrides = ["resources.gpu=1", f"resources.cpu={threads}"]
    spec = load_study(
        str(REPO / "search_spaces" / "ner_depth.yaml"), "default", overrides=overrides
    )
    plan = make_plan(spec)
    return trial_config(spec, plan.arms[0], {}, seed=spec.seeds[0])


def _memory(torch, device) -> dict:
    if device.type != "cuda":
        return {}
    free, total = torch.cuda.mem_get_info(device)
    return {
        "peak_allocated_mb": torch.cuda.max_memory_allocated(device) / 2**20,
        "peak_reserved_mb": torch.cuda.max_memory_reserved(device) / 2**20,
        "device_used_mb": (total - free) / 2**20,
        "device_total_mb": total / 2**20,
    }


def run_whole_trial(config: dict) -> dict:
    """A whole trial as a study's worker runs it: set-up, then every step and evaluation."""
    import torch

    from trainables.settings.config import TrialConfig
    from trainables.training.trials import new_trial

    started = time.perf_counter()
    trial = new_trial(TrialConfig.from_dict(config))
    set_up = time.perf_counter() - started
    metrics: dict = {}
    for metrics in trial.run():  # noqa: B007 - the last evaluation's are the final metrics
        pass
    wall = time.perf_counter() - started - set_up
    return {"set_up_s": set_up, "train_and_eval_s": wall, "steps": trial.step,
            "dev_f1": metrics.get("dev_f1"), "test_f1": metrics.get("test_f1"),
            "device": str(trial.device), "precision": trial.precision,
            **_memory(torch, trial.device)}  # fmt: skip


def _wait_for(path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {path} after {timeout_s:.0f} s")
        time.sleep(0.01)


def measure_steps(config: dict, seconds: float, ready: Path | None, go: Path | None) -> dict:
    """The trial's training steps alone: the first timed apart, then steps for `seconds`
    (after `go` appears, when given, so that trials sharing the GPU train together)."""
    import torch
    from cpu_utilisation import parameter_counts  # bench/: the N of 6·N·T, one definition
    from trainable import _steps  # bench/trainable.py: the loop's own batch order

    from trainables.settings.config import TrialConfig
    from trainables.training.train import Trial

    trial = Trial(TrialConfig.from_dict(config))
    cuda = trial.device.type == "cuda"

    def synced() -> float:
        if cuda:
            torch.cuda.synchronize(trial.device)
        return time.perf_counter()

    stream = _steps(trial, 10**9)
    started = synced()
    trial._train_step(next(stream))
    first_step_s = synced() - started
    # The rest of the first epoch is warm-up too, timed apart: each new padded width brings
    # new kernel shapes (CUDA loads kernels lazily and cuBLAS picks one per shape), and
    # on an H200 the first ~100 steps ran 5-10 times slower than the later ones.
    warm_up_steps = trial.batches_per_epoch - 1
    for _ in range(warm_up_steps):
        trial._train_step(next(stream))
    warm_up_s = synced() - started - first_step_s
    if ready is not None and go is not None:
        ready.touch()
        _wait_for(go, READY_TIMEOUT_S)
    times, real, padded = [], 0, 0
    began = last = synced()
    for batch_ids in stream:
        widths = [len(trial.train_split.windows[i]) for i in batch_ids]
        _, tokens = trial._train_step(batch_ids)
        now = synced()
        times.append(now - last)
        last, real, padded = now, real + tokens, padded + max(widths) * len(widths)
        if now - began >= seconds:
            break
    elapsed = last - began
    return {"first_step_s": first_step_s, "warm_up_s": warm_up_s,
            "warm_up_steps": warm_up_steps, "steps": len(times), "seconds": elapsed,
            "step_ms": 1000 * statistics.median(times), "real_tps": real / elapsed,
            "padded_tps": padded / elapsed, "device": str(trial.device),
            "precision": trial.precision, **parameter_counts(trial.model),
            **_memory(torch, trial.device)}  # fmt: skip


def child(args: argparse.Namespace) -> None:
    config = json.loads(Path(args.config).read_text())
    if args.child == "trial":
        result = run_whole_trial(config)
    else:
        ready, go = (Path(p) if p else None for p in (args.ready, args.go))
        result = measure_steps(config, args.seconds, ready, go)
    print("RESULT " + json.dumps(result), flush=True)


# --- the parent -----------------------------------------------------------------------------
def child_command(args: argparse.Namespace, part: str, config: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", part, "--config",
            str(config), "--seconds", str(args.seconds)]  # fmt: skip


def _start(command: list[str], log: Path) -> subprocess.Popen:
    """A trial's process, its output to a file (a pipe nobody reads while the others warm up
    could fill and stop it)."""
    with log.open("w") as sink:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(command, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT)


def _result(process: subprocess.Popen, log: Path, what: str) -> dict:
    process.wait()
    text = log.read_text(errors="replace")
    lines = [line for line in text.splitlines() if line.startswith("RESULT ")]
    if process.returncode or not lines:
        sys.exit(f"gpu_check: {what} failed (exit {process.returncode}; {log}):\n{text[-3000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def share_round(args: argparse.Namespace, k: int, config: Path, scratch: Path) -> list[dict]:
    """K trial processes on the GPU at once: each warms up and says so, then all train for
    --seconds from one start signal."""
    folder = scratch / f"share-{k}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    go = folder / "go"
    processes, logs = [], [folder / f"trial-{i}.log" for i in range(k)]
    for i in range(k):
        command = child_command(args, "steps", config) + [
            "--ready", str(folder / f"ready-{i}"), "--go", str(go)]  # fmt: skip
        processes.append(_start(command, logs[i]))
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all((folder / f"ready-{i}").exists() for i in range(k)):
            failed = [p for p in processes if p.poll() not in (None, 0)]
            if failed or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        go.touch()
        what = f"a trial of {k} at once"
        return [_result(p, log, what) for p, log in zip(processes, logs, strict=True)]
    finally:  # interrupted or failed: end the trials this script started
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def summarize_sharing(rounds: dict[int, list[dict]]) -> list[dict]:
    """Per K: combined real tokens/s, its ratio to one trial alone, the median step time
    and the device memory in use; `best` marks the K with the most combined throughput."""
    alone = sum(r["real_tps"] for r in rounds[1])
    rows = []
    for k, results in sorted(rounds.items()):
        combined = sum(r["real_tps"] for r in results)
        used = max(r.get("device_used_mb", 0.0) for r in results)
        rows.append({"k": k, "combined_tps": combined, "ratio": combined / alone,
                     "step_ms": statistics.median(r["step_ms"] for r in results),
                     "device_used_mb": used})  # fmt: skip
    best = max(rows, key=lambda row: row["combined_tps"])
    for row in rows:
        row["best"] = row is best
    return rows


def study_arguments(args: argparse.Namespace, folder: Path) -> list[str]:
    """`python -m study.run`'s arguments for the smoke study on the GPU, written to `folder`."""
    return ["ner_depth", "--profile", "smoke",
            "--set", f"resources.gpu={args.study_gpu:g}", "--set", "resources.cpu=1",
            "--storage", str(folder / "ray_results"),
            "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}",
            "--reports", str(folder / "reports")]  # fmt: skip


def run_study(args: argparse.Namespace, scratch: Path) -> None:
    folder = scratch / "study"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    command = [sys.executable, "-m", "study.run", *study_arguments(args, folder)]
    print(f"\nstudy: {' '.join(command[1:])}", flush=True)
    log = folder / "study.log"  # all of it: the verdict on success, the cause on failure
    started = time.perf_counter()
    with log.open("w") as sink:
        done = subprocess.run(command, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - started
    print(f"  exit {done.returncode} in {wall:.0f} s ({args.study_gpu:g} GPU a trial); {log}")
    print("  its last lines:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-25:]))


def gpu_line(peak: float | None, given: bool) -> str:
    import torch

    props = torch.cuda.get_device_properties(0)
    source = "--peak-tflops" if given else ("the table" if peak else "unknown: --peak-tflops")
    shown = f"{peak:g} TFLOP/s" if peak else "?"
    return (f"GPU: {props.name} x{torch.cuda.device_count()}, {props.total_memory / 2**30:.0f} "
            f"GiB, compute capability {props.major}.{props.minor}; torch {torch.__version__}, "
            f"CUDA {torch.version.cuda}; peak dense bf16 {shown} ({source})")  # fmt: skip


def parent(args: argparse.Namespace) -> None:
    import torch
    from support import machine_line

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so share_round ends its trials

    peak = args.peak_tflops or peak_bf16_tflops(torch.cuda.get_device_name(0))
    print(machine_line("bf16 on the GPU (autocast; fp32 weights and AdamW state)"))
    print(gpu_line(peak, args.peak_tflops is not None), flush=True)
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    if "study" not in args.skip:
        run_study(args, scratch)
    config_path = scratch / "trial.json"
    config = ner_depth_trial(args.threads)
    config_path.write_text(json.dumps(config))
    print(f"\ntrial: ner_depth default profile, {config['model']}, batch {config['batch_size']}"
          f", lr {config['lr']:g}, seed {config['seed']}, device {config['device']}, "
          f"precision {config['precision']}, {args.threads} CPU threads")  # fmt: skip
    if "trial" not in args.skip:
        log = scratch / "trial.log"
        process = _start(child_command(args, "trial", config_path), log)
        print_trial(_result(process, log, "the whole trial"))
    rounds = {}
    for k in args.share if "share" not in args.skip else [1]:
        rounds[k] = share_round(args, k, config_path, scratch)
        if k == 1:
            print_steps(rounds[1][0], peak)
    if len(rounds) > 1:
        print_sharing(rounds, peak)


def print_trial(r: dict) -> None:
    print(f"  whole trial on {r['device']} in {r['precision']}: set-up {r['set_up_s']:.1f} s, "
          f"{r['steps']} steps with evaluations {r['train_and_eval_s']:.1f} s; dev F1 "
          f"{r['dev_f1']:.4f}, test F1 {r['test_f1']:.4f}; peak allocated "
          f"{r.get('peak_allocated_mb', 0):.0f} MB, reserved {r.get('peak_reserved_mb', 0):.0f} "
          "MB")  # fmt: skip


def print_steps(r: dict, peak: float | None) -> None:
    mfu = (f"{model_flop_utilisation(r['params_non_embedding'], r['real_tps'], peak):.3f}"
           if peak else "? (no peak: --peak-tflops)")  # fmt: skip
    print(f"  steps alone: first step {r['first_step_s']:.2f} s, the rest of the first epoch "
          f"({r['warm_up_steps']} steps) {r['warm_up_s']:.1f} s (both apart); then {r['steps']} "
          f"steps in {r['seconds']:.1f} s: step {r['step_ms']:.1f} ms (median), "
          f"{r['real_tps']:.0f} real tokens/s ({r['padded_tps']:.0f} padded)")  # fmt: skip
    print(f"  MFU (6 x {r['params_non_embedding'] / 1e6:.2f}M non-embedding params x real "
          f"tokens/s / peak): {mfu}; peak allocated {r.get('peak_allocated_mb', 0):.0f} MB, "
          f"reserved {r.get('peak_reserved_mb', 0):.0f} MB, device in use "
          f"{r.get('device_used_mb', 0):.0f} of {r.get('device_total_mb', 0):.0f} MB")  # fmt: skip


def print_sharing(rounds: dict[int, list[dict]], peak: float | None) -> None:
    rows = summarize_sharing(rounds)
    print(f"\nshare: trials at once on one GPU, each {rounds[1][0]['seconds']:.1f} s of steps")
    print(f"{'trials':>6}{'resources.gpu':>15}{'combined tokens/s':>19}{'x one alone':>13}"
          f"{'step ms':>9}{'MFU':>7}{'device MB in use':>18}")  # fmt: skip
    params = rounds[1][0]["params_non_embedding"]
    for row in rows:
        mfu = f"{model_flop_utilisation(params, row['combined_tps'], peak):.3f}" if peak else "?"
        mark = "  <- most" if row["best"] else ""
        print(f"{row['k']:>6}{1 / row['k']:>15.3g}{row['combined_tps']:>19.0f}"
              f"{row['ratio']:>13.2f}{row['step_ms']:>9.1f}{mfu:>7}"
              f"{row['device_used_mb']:>18.0f}{mark}")  # fmt: skip
    best = next(row for row in rows if row["best"])
    print(f"most combined throughput: {best['k']} trials a GPU (resources: {{gpu: "
          f"{1 / best['k']:g}}}), {best['ratio']:.2f}x one trial alone")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(args)
        return 0
    refusal = cuda_refusal()
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    parent(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
