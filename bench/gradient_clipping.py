"""Gradient clipping of a MiniLM tagger's step: over every row of its embedding tables, as
torch does, against over the rows the step wrote, on the same gradients, side by side. Both
are trainables/training/optimization.py's `clip_gradients`, without and with its row-gradient
tables; without them it is torch's `clip_grad_norm_` bit for bit, less its multiply by 1.0
when the norm is within the bound (so "within" compares the norms alone).

    ./with-venv python bench/gradient_clipping.py             # 1 thread, 7 rounds
    ./with-venv python bench/gradient_clipping.py --threads 2

Both variants give the same gradients bit for bit
(tests/trainables/model/test_embedding_gradient.py); what differs is two passes over the
47 MB word-table gradient per step: its norm, and, when the step is clipped, its multiply.
Each round times both variants on a clipped step (`max_norm` far below the norm) and on one
within the bound, in an interleaved order; the table gives medians over rounds and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

from support import machine_line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=5, help="timed clips per variant and round")
    args = parser.parse_args()

    import torch

    from trainables.model.embedding_gradient import row_gradient_tables
    from trainables.model.tagger import build_tagger
    from trainables.training.optimization import clip_gradients

    torch.set_num_threads(args.threads)
    print(machine_line("fp32 (gradients are fp32 in every precision)"))
    print(f"threads {args.threads}, {args.rounds} rounds x {args.repeats} clips per variant")
    tagger, _ = build_tagger("minilm", 21, generator=torch.Generator().manual_seed(0))
    ids = torch.randint(1000, 29000, (16, 40), generator=torch.Generator().manual_seed(1))
    labels = torch.randint(0, 21, (16, 40), generator=torch.Generator().manual_seed(2))
    _, loss = tagger(ids, torch.ones_like(ids), labels)
    loss.backward()
    params = [p for p in tagger.parameters() if p.grad is not None]
    kept = [p.grad.clone() for p in params]
    norm = float(torch.nn.utils.get_total_norm([p.grad for p in params]))
    variants = {"every row": None, "written rows": row_gradient_tables(tagger)}
    cases = {"clipped": norm / 10, "within": norm * 10}

    times: dict[tuple[str, str], list[float]] = {}
    for round_ in range(args.rounds):
        order = list(variants.items())[:: 1 if round_ % 2 == 0 else -1]
        for case, max_norm in cases.items():
            for name, tables in order:
                taken = []
                for _ in range(args.repeats):
                    for p, g in zip(params, kept, strict=True):
                        p.grad.copy_(g)
                    started = time.perf_counter()
                    clip_gradients(params, max_norm, tables)
                    taken.append(time.perf_counter() - started)
                times.setdefault((case, name), []).append(statistics.median(taken) * 1e3)

    print(f"\n{'step':<8} {'every row':>18} {'written rows':>13} {'ratio':>6}")
    for case in cases:
        dense = statistics.median(times[(case, "every row")])
        rows = statistics.median(times[(case, "written rows")])
        print(f"{case:<8} {dense:>15.2f} ms {rows:>10.2f} ms {dense / rows:>5.2f}x")


if __name__ == "__main__":
    main()
