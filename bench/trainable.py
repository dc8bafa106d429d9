"""Train and evaluation throughput of this project's loop vs `transformers.Trainer`, side by side.

Same model (the embedded MiniLM with a token-classification head), same WNUT-16 training
windows, batch size, steps, learning rate and thread count. Each variant runs in its own
subprocess so that its peak RSS is its own (taken when training ends, before evaluation).
Tokens are counted without padding, so a loop that pads less gets credit only for the real
work it does.

Evaluation matters too: a default-profile trial scores dev six times and dev + test at the
end. After training, `ours` times `Trial.predict` on the dev windows (the path every dev
evaluation takes: batches packed to `eval_batch_tokens` padded tokens, longest first, then
word-level decoding) and `trainer` times `Trainer.predict` on the same dev windows with
`per_device_eval_batch_size` = --batch-size (the Trainer's sequential order, padded per batch
by its token-classification collator; logits gathered, as `evaluate` with metrics would).
One untimed pass first, then --eval-passes timed ones. Length grouping changes only the
Trainer's training order, so `trainer_grouped` is not evaluated again.

    python bench/trainable.py [--steps 80] [--batch-size 16] [--threads 2] [--eval-passes 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

VARIANTS = ("ours", "trainer", "trainer_grouped")
EVALUATED = ("ours", "trainer")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _common(args) -> dict:
    return {"batch_size": args.batch_size, "lr": 5e-5, "seed": 0, "threads": args.threads}


def run_ours(args) -> dict:
    from trainables.config import TrialConfig
    from trainables.train import Trial

    trial = Trial(
        TrialConfig.from_dict(
            _common(args) | {"max_steps": args.steps, "epochs": 50, "eval_every": 10**9}
        )
    )
    tokens, busy = 0, 0.0
    for batch_ids in _steps(trial, args.steps):
        started = time.perf_counter()
        _, n = trial._train_step(batch_ids)
        busy += time.perf_counter() - started
        tokens += n
    result = {"tokens": tokens, "seconds": busy, "peak_rss_mb": _peak_rss_mb()}
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
    import torch
    from transformers import (
        AutoModelForTokenClassification,
        DataCollatorForTokenClassification,
        Trainer,
        TrainingArguments,
    )

    from trainables.config import TrialConfig
    from trainables.tagger import resolve_model
    from trainables.train import Trial

    torch.set_num_threads(args.threads)
    # reuse the exact encoded training windows of our loop
    trial = Trial(TrialConfig.from_dict(_common(args) | {"max_steps": 1}))
    dataset = _dataset(trial.train_split.windows)
    model = AutoModelForTokenClassification.from_pretrained(
        resolve_model("minilm"), num_labels=len(trial.label_map)
    )
    collator = DataCollatorForTokenClassification(trial.tokenizer)
    counted = {"tokens": 0}

    def counting_collator(features):
        batch = collator(features)
        counted["tokens"] += int(batch["attention_mask"].sum())
        return batch

    training_args = TrainingArguments(
        output_dir=str(Path(args.scratch) / ("grouped" if grouped else "default")),
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.batch_size,
        max_steps=args.steps,
        learning_rate=5e-5,
        **_length_grouping(grouped),
        report_to=[],
        save_strategy="no",
        eval_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model, args=training_args, train_dataset=dataset, data_collator=counting_collator
    )
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    result = {"tokens": counted["tokens"], "seconds": seconds, "peak_rss_mb": _peak_rss_mb()}
    if grouped:
        return result
    dev = _dataset(trial.eval_splits["dev"].windows)
    trainer.predict(dev)
    counted["tokens"] = 0
    started = time.perf_counter()
    for _ in range(args.eval_passes):
        trainer.predict(dev)
    eval_seconds = time.perf_counter() - started
    return result | {"eval_tokens": counted["tokens"], "eval_seconds": eval_seconds}


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


def parent(args) -> None:
    results = {}
    for variant in VARIANTS:
        cmd = [sys.executable, __file__, "--variant", variant, "--steps", str(args.steps),
               "--batch-size", str(args.batch_size), "--threads", str(args.threads),
               "--eval-passes", str(args.eval_passes), "--scratch", args.scratch]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
        if out.returncode or not line:
            sys.exit(f"bench: variant {variant} failed:\n{out.stderr[-2000:]}")
        results[variant] = json.loads(line[-1][len("RESULT ") :])
    print(f"train throughput, MiniLM on WNUT-16, batch {args.batch_size}, {args.steps} steps, "
          f"{args.threads} threads (real tokens, padding excluded)")  # fmt: skip
    print(f"{'variant':<18}{'tokens/s':>10}{'peak RSS MB':>13}{'eval tokens/s':>15}")
    for variant, r in results.items():
        r["tps"] = r["tokens"] / r["seconds"]
        evaluated = f"{r['eval_tokens'] / r['eval_seconds']:.0f}" if "eval_tokens" in r else "-"
        print(f"{variant:<18}{r['tps']:>10.0f}{r['peak_rss_mb']:>13.0f}{evaluated:>15}")
    ours = results["ours"]["tps"]
    print(f"ratio ours / Trainer default          : {ours / results['trainer']['tps']:.2f}"
          "  (target >= 1.5)")  # fmt: skip
    print(f"ratio ours / Trainer group_by_length  : {ours / results['trainer_grouped']['tps']:.2f}"
          "  (target >= 1.0)")  # fmt: skip
    ours_eval, trainer_eval = (results[v]["eval_tokens"] / results[v]["eval_seconds"]
                               for v in EVALUATED)  # fmt: skip
    dev_tokens = results["ours"]["eval_tokens"] // args.eval_passes
    print(f"ratio ours / Trainer predict (eval)   : {ours_eval / trainer_eval:.2f}"
          f"  (dev, {dev_tokens} real tokens x {args.eval_passes} passes)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variant", choices=VARIANTS)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--eval-passes", type=int, default=3, help="timed dev evaluations")
    parser.add_argument("--scratch", default="/tmp/ner-depth-bench")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    child(args) if args.variant else parent(args)


if __name__ == "__main__":
    main()
