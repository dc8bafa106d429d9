"""Train and evaluation throughput of this project's loop vs `transformers.Trainer`, side by side,
each in the same precision, timed in the same scope and with the same allocator.

Same model (the embedded MiniLM with a token-classification head), same WNUT-16 training
windows, batch size, steps, learning rate, thread count and precision: `ours` runs a trial with
`precision` set, the Trainer runs with `bf16=True` for bf16 (autocast on the CPU, fp32 weights
and optimizer state, as ours) and without it for fp32. Each variant runs in its own subprocess
so that its peak RSS is its own (taken when training ends, before evaluation). Tokens are
counted without padding, so a loop that pads less gets credit only for the real work it does.

What is timed, the same for every variant: the training loop's steps, from the end of one
optimizer step to the end of the next, so a step's batch (choosing its windows, collating,
the Trainer's data loader) counts with it. `ours` reads the clock after each `_train_step` of
the loop's own batch order; the Trainer through a callback at `on_step_end`. The first step
(from the loop's start, `on_train_begin` for the Trainer, to the end of step 1) is the
warm-up: oneDNN picks its kernels and the allocator grows its heap there. It is reported apart
(`first step s`) and left out of tokens/s. Set-up before the loop (model load, data encoding,
the Trainer's own preparation) is in neither.

The allocator is the same too: every variant's process calls
`trainables.model.memory.keep_freed_memory` as its first act (a trial's process calls it
anyway), so freed heap memory is reused, not returned to the kernel and faulted in again, in
all of them. The report says whether it took effect (glibc only).

Evaluation matters too: a default-profile trial scores dev six times and dev + test at the
end. After training, `ours` times `Trial.predict` on the dev windows (the path every dev
evaluation takes: batches packed to `eval_batch_tokens` padded tokens, longest first, then
word-level decoding) and `trainer` times `Trainer.predict` on the same dev windows with
`per_device_eval_batch_size` = --batch-size (the Trainer's sequential order, padded per batch
by its token-classification collator; logits gathered, as `evaluate` with metrics would).
One untimed pass first, then --eval-passes timed ones. Length grouping changes only the
Trainer's training order, so `trainer_grouped` is not evaluated again.

By default each variant trains exactly one epoch, so all of them see the same windows and the
same real tokens. With fewer steps each variant sees a different subset (its own batch order:
the Trainer's length grouping walks megabatches longest first, ours shuffles batches), and
tokens/s then also measures which lengths were drawn, not only the loop.

One run of a variant differs from the next by about 10% on a shared 2-core VM, so the variants
run in --repeats rounds, one after another, and the ratios are of the medians. A `busy` column
gives the CPU time each run got per wall second and thread: well below 100% means other work
shared the cores, and the run is slow by about that much; `per CPU-s` (tokens per CPU-second
of a thread) is distorted far less by such sharing, and is what to compare on a busy machine
(best at --threads 1).

Target, in each precision: ours >= 1.5x the Trainer with group_by_length (the faster of the
two Trainers) in that precision. By default both precisions run where the CPU has
native bf16 (trainables/settings/precision.py), fp32 alone elsewhere.

    python bench/trainable.py [--steps 0 (one epoch)] [--batch-size 16] [--threads 2]
                              [--eval-passes 3] [--repeats 3] [--precision bf16 fp32]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from support import machine_line

LOOPS = ("ours", "trainer", "trainer_grouped")
EVALUATED = ("ours", "trainer")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class StepClock:
    """Wall and CPU clocks read when a training loop starts and at the end of each optimizer
    step: the first step apart (the warm-up), the rest as one timed span. Both loops are timed
    by this one class, so their scopes cannot drift apart."""

    def __init__(self) -> None:
        self.ends: list[tuple[float, float]] = []
        self.started: tuple[float, float] | None = None

    def start(self) -> None:
        self.started = (time.perf_counter(), time.process_time())

    def step_end(self) -> None:
        self.ends.append((time.perf_counter(), time.process_time()))

    def result(self, step_tokens: list[int]) -> dict:
        """`step_tokens`: the real tokens of each step in order (at least as many as steps)."""
        if self.started is None or len(self.ends) < 2:
            raise RuntimeError(f"timed {len(self.ends)} steps; the span needs at least 2")
        (first_wall, first_cpu), (last_wall, last_cpu) = self.ends[0], self.ends[-1]
        return {
            "first_step_seconds": first_wall - self.started[0],
            "first_step_tokens": step_tokens[0],
            "seconds": last_wall - first_wall,
            "cpu_seconds": last_cpu - first_cpu,
            "tokens": sum(step_tokens[1 : len(self.ends)]),
            "timed_steps": len(self.ends) - 1,
        }


def _common(args) -> dict:
    # the CPU, as the Trainer's use_cpu, also on a machine with a GPU
    return {"batch_size": args.batch_size, "lr": 5e-5, "seed": 0, "threads": args.threads,
            "precision": args.precision[0], "device": "cpu"}  # fmt: skip


def _same_allocator() -> bool:
    """The allocator setting of every variant: freed heap kept for reuse (a trial's process
    sets it in `Trial`; calling it again there changes nothing). False where the C library
    is not glibc, for every variant alike."""
    from trainables.model.memory import keep_freed_memory

    return keep_freed_memory()


def run_ours(args) -> dict:
    heap_kept = _same_allocator()  # first, as in the Trainer's variants
    from trainables.settings.config import TrialConfig
    from trainables.training.train import Trial

    trial = Trial(TrialConfig.from_dict(_common(args) | {"epochs": 50, "eval_every": 10**9}))
    steps = args.steps or trial.batches_per_epoch
    clock, step_tokens = StepClock(), []
    clock.start()
    for batch_ids in _steps(trial, steps):
        _, n = trial._train_step(batch_ids)
        clock.step_end()
        step_tokens.append(n)
    about = {"steps": steps, "peak_rss_mb": _peak_rss_mb(), "precision": trial.precision}
    result = clock.result(step_tokens) | about | {"heap_kept": heap_kept}
    return result | eval_ours(trial, args.eval_passes)


def eval_ours(trial, passes: int) -> dict:
    """Dev evaluation as the loop does it (`Trial.predict`), after one untimed pass."""
    dev = trial.eval_splits["dev"]
    trial.predict(dev)
    started = time.perf_counter()
    for _ in range(passes):
        trial.predict(dev)
    return {"eval_tokens": dev.num_tokens * passes, "eval_seconds": time.perf_counter() - started}


def _steps(trial, steps):
    """The loop's own batch order, epoch after epoch, for exactly `steps` steps."""
    from trainables.data.batching import train_batches

    epoch, done = 0, 0
    while done < steps:
        for batch in train_batches(trial.train_lengths, trial.cfg.batch_size, 0, epoch):
            if done == steps:
                return
            yield batch
            done += 1
        epoch += 1


def _length_grouping(grouped: bool) -> dict:
    """transformers 5.x replaced `group_by_length=True` with a sampling strategy."""
    from transformers import TrainingArguments

    fields = getattr(TrainingArguments, "__dataclass_fields__", {})
    if "train_sampling_strategy" in fields:
        return {"train_sampling_strategy": "group_by_length" if grouped else "random"}
    return {"group_by_length": grouped}


def run_trainer(args, grouped: bool) -> dict:
    heap_kept = _same_allocator()  # first, as in `ours`
    import torch
    from transformers import (
        AutoModelForTokenClassification,
        DataCollatorForTokenClassification,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    from trainables.model.tagger import resolve_model

    torch.set_num_threads(args.threads)
    train_windows, dev_windows, label_map, tokenizer = _encoded_windows(args)
    dataset = _dataset(train_windows)
    steps = args.steps or math.ceil(len(dataset) / args.batch_size)
    model = AutoModelForTokenClassification.from_pretrained(
        resolve_model("minilm"), num_labels=len(label_map)
    )
    collator = DataCollatorForTokenClassification(tokenizer)
    # the real tokens of each batch collated, in order: the data loader may collate a batch
    # ahead of the step that trains it, so a step's tokens are read by position afterwards
    collated: list[int] = []

    def counting_collator(features):
        batch = collator(features)
        collated.append(int(batch["attention_mask"].sum()))
        return batch

    clock = StepClock()

    class StepTimer(TrainerCallback):
        def on_train_begin(self, *_, **__):
            clock.start()

        def on_step_end(self, *_, **__):
            clock.step_end()

    training_args = TrainingArguments(
        output_dir=str(Path(args.scratch) / ("grouped" if grouped else "default")),
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.batch_size,
        max_steps=steps,
        learning_rate=5e-5,
        **_length_grouping(grouped),
        report_to=[],
        save_strategy="no",
        eval_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        bf16=args.precision[0] == "bf16",  # autocast on the CPU, as ours
        seed=0,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=dataset,
        data_collator=counting_collator,
        callbacks=[StepTimer()],
    )
    trainer.train()
    result = clock.result(collated) | {"steps": steps, "precision": args.precision[0],
                                       "heap_kept": heap_kept}  # fmt: skip
    result["peak_rss_mb"] = _peak_rss_mb()
    if grouped:
        return result
    dev = _dataset(dev_windows)
    trainer.predict(dev)
    collated.clear()
    started = time.perf_counter()
    for _ in range(args.eval_passes):
        trainer.predict(dev)
    eval_seconds = time.perf_counter() - started
    return result | {"eval_tokens": sum(collated), "eval_seconds": eval_seconds}


def _encoded_windows(args):
    """Our loop's exact encoded train and dev windows, built without a `Trial` (which would
    also build our model and optimizer in the Trainer's process)."""
    from trainables.data.encoding import encode
    from trainables.data.sources import load_checked_splits
    from trainables.model.tagger import load_encoder
    from trainables.settings.config import TrialConfig

    cfg = TrialConfig.from_dict(_common(args))
    splits, label_map = load_checked_splits(cfg.data)
    tokenizer = load_encoder(cfg.model)[1]
    options = {"max_length": cfg.max_length, "label_all_subwords": cfg.label_all_subwords}
    train, dev = (encode(s, tokenizer, label_map, **options) for s in (splits.train, splits.dev))
    return train.windows, dev.windows, label_map, tokenizer


def _dataset(windows):
    from datasets import Dataset

    return Dataset.from_dict(
        {
            "input_ids": [list(w.input_ids) for w in windows],
            "labels": [list(w.labels) for w in windows],
        }
    )


def child(args) -> None:
    if args.variant == "ours":
        result = run_ours(args)
    else:
        result = run_trainer(args, grouped=args.variant == "trainer_grouped")
    print("RESULT " + json.dumps(result))


def run_variant(args, variant: str, precision: str) -> dict:
    cmd = [sys.executable, __file__, "--variant", variant, "--precision", precision,
           "--steps", str(args.steps), "--batch-size", str(args.batch_size),
           "--threads", str(args.threads), "--eval-passes", str(args.eval_passes),
           "--scratch", args.scratch]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    if out.returncode or not line:
        sys.exit(f"bench: variant {variant} ({precision}) failed:\n{out.stderr[-2000:]}")
    r = json.loads(line[-1][len("RESULT ") :])
    r["tps"] = r["tokens"] / r["seconds"]
    r["busy"] = r["cpu_seconds"] / (r["seconds"] * args.threads)
    r["cpu_tps"] = r["tokens"] / (r["cpu_seconds"] / args.threads)  # what a quiet machine gives
    if "eval_tokens" in r:
        r["eval_tps"] = r["eval_tokens"] / r["eval_seconds"]
    return r


def parent(args) -> None:
    """Rounds of all variants in turn; medians over rounds. One run of a variant on a shared
    2-core VM varies by about 10% from the next, more than the differences being measured."""
    print(machine_line(" and ".join(args.precision) + " (each variant in each)"), flush=True)
    print(
        "timed: each loop's optimizer steps from the end of step 1 to the end of the last "
        "(batch preparation included), the first step apart; set-up in neither",
        flush=True,
    )
    variants = [(loop, precision) for precision in args.precision for loop in LOOPS]
    rounds: dict[tuple[str, str], list[dict]] = {v: [] for v in variants}
    for number in range(1, args.repeats + 1):
        for variant in variants:
            rounds[variant].append(run_variant(args, *variant))
        line = "  ".join(f"{v[0]} {v[1]} {rounds[v][-1]['tps']:.0f}" for v in variants)
        print(f"round {number}/{args.repeats}: train tokens/s  {line}", flush=True)
    first = {v: r[0] for v, r in rounds.items()}
    steps = "/".join(sorted({str(r["steps"]) for r in first.values()}))
    print(f"\ntrain throughput, MiniLM on WNUT-16, batch {args.batch_size}, {steps} steps "
          f"(the first timed apart), {args.threads} threads (real tokens, padding excluded); "
          f"median of {args.repeats} rounds")  # fmt: skip
    print(f"{'variant':<18}{'precision':>10}{'tokens':>8}{'tokens/s':>10}{'min-max':>12}"
          f"{'busy':>7}{'per CPU-s':>11}{'first step s':>14}{'peak RSS MB':>13}"
          f"{'eval tokens/s':>15}")  # fmt: skip
    median = {v: statistics.median(r["tps"] for r in rounds[v]) for v in variants}
    for (loop, precision), runs in rounds.items():
        spread = f"{min(r['tps'] for r in runs):.0f}-{max(r['tps'] for r in runs):.0f}"
        rss = max(r["peak_rss_mb"] for r in runs)
        got, per_cpu = min(r["busy"] for r in runs), statistics.median(r["cpu_tps"] for r in runs)
        evaluated = (f"{statistics.median(r['eval_tps'] for r in runs):.0f}"
                     if loop in EVALUATED else "-")  # fmt: skip
        warm_up = statistics.median(r["first_step_seconds"] for r in runs)
        print(f"{loop:<18}{precision:>10}{first[(loop, precision)]['tokens']:>8}"
              f"{median[(loop, precision)]:>10.0f}{spread:>12}{got:>7.0%}{per_cpu:>11.0f}"
              f"{warm_up:>14.3f}{rss:>13.0f}{evaluated:>15}")  # fmt: skip
    print(allocator_line(rounds))
    for precision in args.precision:
        print_ratios(args, rounds, median, precision)
    if set(args.precision) >= {"fp32", "bf16"}:
        gain = median[("ours", "bf16")] / median[("ours", "fp32")]
        print(f"\nours bf16 / ours fp32 (train tokens/s)     : {gain:.2f}")
    quiet = min(r["busy"] for runs in rounds.values() for r in runs)
    if quiet < 0.9:
        print(
            f"warning: a run got only {quiet:.0%} of its cores' time: the machine was busy; "
            "rerun on a quiet machine before quoting these numbers"
        )


def allocator_line(rounds: dict) -> str:
    """Whether freed heap was kept for reuse, which every variant asks for alike."""
    kept = {run["heap_kept"] for runs in rounds.values() for run in runs}
    if kept == {True}:
        said = "yes, in every variant"
    elif kept == {False}:
        said = "no, in any variant (not glibc)"
    else:
        said = "in some runs only: the comparison is unequal"
    return f"allocator: freed heap kept for reuse (trainables/model/memory.py): {said}"


# P1: ours against the Trainer with length grouping (its faster setting), same precision
GROUPED_TARGET = 1.5


def print_ratios(args, rounds: dict, median: dict, precision: str) -> None:
    """Ours against each Trainer in one precision, with that precision's targets."""
    ours = median[("ours", precision)]
    default, grouped = median[("trainer", precision)], median[("trainer_grouped", precision)]
    print(f"\n{precision}:")
    met = "met" if ours / grouped >= GROUPED_TARGET else "missed"
    print(f"ratio ours / Trainer default          : {ours / default:.2f}")
    print(f"ratio ours / Trainer group_by_length  : {ours / grouped:.2f}"
          f"  (target >= {GROUPED_TARGET}: {met})")  # fmt: skip
    per_cpu = {v: statistics.median(r["cpu_tps"] for r in rounds[(v, precision)])
               for v in LOOPS}  # fmt: skip
    print(f"  the same per CPU-second of each     : "
          f"{per_cpu['ours'] / per_cpu['trainer_grouped']:.2f}")  # fmt: skip
    ours_eval, trainer_eval = (
        statistics.median(r["eval_tps"] for r in rounds[(loop, precision)]) for loop in EVALUATED
    )
    dev_tokens = rounds[("ours", precision)][0]["eval_tokens"] // args.eval_passes
    print(f"ratio ours / Trainer predict (eval)   : {ours_eval / trainer_eval:.2f}"
          f"  (dev, {dev_tokens} real tokens x {args.eval_passes} passes)")  # fmt: skip


def default_precisions() -> list[str]:
    """bf16 where this CPU has it natively (what `auto` picks), and fp32 beside it."""
    from trainables.settings.precision import host_has_native_bf16

    return ["bf16", "fp32"] if host_has_native_bf16() else ["fp32"]


def _steps_option(text: str) -> int:
    steps = int(text)
    if steps == 1 or steps < 0:
        raise argparse.ArgumentTypeError("0 (one epoch) or at least 2: the first is timed apart")
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variant", choices=LOOPS)
    parser.add_argument("--precision", nargs="+", choices=("bf16", "fp32"),
                        help="default: bf16 and fp32 where bf16 is native, else fp32")  # fmt: skip
    steps_help = "0: one full epoch; else at least 2 (the first timed apart)"
    parser.add_argument("--steps", type=_steps_option, default=0, help=steps_help)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--eval-passes", type=int, default=3, help="timed dev evaluations")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of all variants")
    parser.add_argument("--scratch", default="/tmp/ner-depth-bench")
    args = parser.parse_args()
    args.precision = args.precision or default_precisions()
    child(args) if args.variant else parent(args)


if __name__ == "__main__":
    main()
