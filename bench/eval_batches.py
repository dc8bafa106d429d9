"""How big should an evaluation batch be? One trial's dev-set evaluation (MiniLM on WNUT-16's
359 dev sentences, forward only) timed at several `eval_batch_tokens` side by side, with the
words each size tags otherwise than the largest.

    ./with-venv python bench/eval_batches.py   # the precision auto picks, 1 thread
    ./with-venv python bench/eval_batches.py --threads 2 --sizes 512 1024 8192

Batches are packed longest first up to `eval_batch_tokens` padded sub-words
(trainables/data/batching.py). A batch many times a training batch's size (16 sentences,
about 640 sub-words) streams its activations through memory rather than cache, so the
setting's default is about a training batch. Each round times every size, in an order that
alternates between rounds; the table gives wall-clock medians and ratios to the largest size.
The model is first trained `--train-steps` steps (the default profile's first evaluation),
so that it is scored as a study scores it. A batch's padding is masked, but bf16 matmuls of
another shape round differently, so a few near-tied words may change tag between sizes: the
table counts them, against the largest size. The dev loss is weighted by labelled tokens, so
the batching changes it only by that rounding.
"""

from __future__ import annotations

import argparse
import statistics
import time

from support import trial_machine_line

# embedded MiniLM and WNUT-16, as the default profile trains them
CONFIG = {"lr": 1e-4, "seed": 0, "batch_size": 16, "dynamics": "off", "device": "cpu"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--train-steps", type=int, default=53, help="steps trained before timing")
    args = parser.parse_args()

    from trainables.settings.config import TrialConfig
    from trainables.training.train import Trial

    config = {**CONFIG, "threads": args.threads, "eval_every": args.train_steps}
    print(trial_machine_line(config))
    trial = Trial(TrialConfig.from_dict(config))
    next(trial.run())  # train to the first evaluation
    dev = trial.eval_splits["dev"]
    sub_words = sum(len(w) for w in dev.windows)
    print(f"dev set: {len(dev.windows)} windows, {sub_words} sub-words; {args.threads} thread(s), "
          f"{args.rounds} rounds, after {trial.step} training steps")  # fmt: skip
    times: dict[int, list[float]] = {size: [] for size in args.sizes}
    tags: dict[int, list] = {}
    for round_ in range(args.rounds):
        for size in args.sizes[:: 1 if round_ % 2 == 0 else -1]:
            trial.cfg.eval_batch_tokens = size
            started = time.perf_counter()
            tags[size], _ = trial.predict(dev)
            times[size].append(time.perf_counter() - started)
    largest = max(args.sizes)
    base = statistics.median(times[largest])
    print(
        f"\n{'eval_batch_tokens':>17} {'s':>7} {f'/ {largest}':>8} {'words tagged otherwise':>23}"
    )
    for size, taken in times.items():
        pairs = zip(tags[largest], tags[size], strict=True)
        differ = sum(a != b for x, y in pairs for a, b in zip(x, y, strict=True))
        words = sum(map(len, tags[size]))
        median = statistics.median(taken)
        print(f"{size:>17} {median:>7.3f} {median / base:>8.3f} {differ:>13} of {words:>6}")


if __name__ == "__main__":
    main()
