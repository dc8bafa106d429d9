"""Every verdict's simulated false rate under the sequential rule, with its Monte-Carlo
standard error, as the table in docs/statistics.md.

    ./with-venv python bench/error_rates.py [--studies 400000]

Runs the reference implementation of tests/study/stats/test_error_rates.py (scipy's t-tests,
no code shared with `study.stats.sequential.decide`, which the test ties to it) for each plan
it tests: *better* at a true difference of 0 without a margin, *equivalent* and *B
non-inferior* at +margin, *A non-inferior* at -margin (alpha 0.05, margin 0.5 sd,
non-inferiority at alpha / 2).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
from pathlib import Path

from support import NO_TRAINING, machine_line

TEST = Path(__file__).resolve().parents[1] / "tests/study/stats/test_error_rates.py"


def _reference():
    spec = importlib.util.spec_from_file_location("error_rates_reference", TEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--studies", type=int, default=400_000, help="simulated studies each")
    studies = parser.parse_args().studies
    print(machine_line(NO_TRAINING))
    ref = _reference()
    levels = {"better": ref.ALPHA, "equivalent": ref.ALPHA, "A non-inferior": ref.ALPHA / 2,
              "B non-inferior": ref.ALPHA / 2}  # fmt: skip
    print(f"{studies} simulated studies per plan and true difference\n")
    print("| looks | spending | verdict | level | false rate ± MC se |")
    print("|---|---|---|---|---|")
    for looks, kind in ref.PLANS:
        rates = ref.false_rates(looks, kind, studies=studies, seed=100 + len(looks))
        for verdict, rate in rates.items():
            se = math.sqrt(rate * (1 - rate) / studies)
            looks_text = ", ".join(map(str, looks))
            print(f"| {looks_text} | {kind} | {verdict} | {levels[verdict]:g} | "
                  f"{rate:.4f} ± {se:.4f} |")  # fmt: skip


if __name__ == "__main__":
    main()
