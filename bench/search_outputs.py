"""The outputs of bench/search_efficiency.py: the bench's own lines, the table of contenders
(mean and spread of regret and cost share over repetitions), its plot of regret against cost,
and the CSV files. Everything a synthetic run prints or writes says it is no finding."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import search_noise as noise
import search_reference as grid

NOT_A_FINDING = "SYNTHETIC: a response surface tests the machinery; these numbers are no finding"


def say(args, text: str) -> None:
    """A line of the bench's own, marked synthetic in that mode."""
    print(f"search_efficiency{' [SYNTHETIC]' if args.trainable == 'synthetic' else ''}: {text}",
          flush=True)  # fmt: skip


def summary(reps: pd.DataFrame, trainable: str) -> pd.DataFrame:
    """Per contender: repetitions, those in which every arm chose an lr (the only ones whose
    regret is averaged), regret and cost share (mean and sd), and how many repetitions drew
    the very lrs of a contender before it in the same repetition."""
    by = reps.groupby("contender", sort=False)
    table = by[["regret_dev", "regret_test", "cost_share"]].agg(["mean", "std"])
    table.columns = [f"{a}_{b}" for a, b in table.columns]
    table.insert(0, "repetitions", by.size())
    table.insert(1, "measured", by.regret_dev.count())
    table["same_draws"] = by.same_draws_as.agg(lambda s: int((s.fillna("") != "").sum()))
    table["trainable"] = "synthetic (not a finding)" if trainable == "synthetic" else trainable
    return table.reset_index()


def floors(args, curves: pd.DataFrame, sign: float) -> dict[str, tuple[float, float]]:
    """Per arm, (one seed's pooled sd, the regret the grid's best lr itself would show against
    a redrawn grid): below it, regrets are not resolved (bench/search_noise.py's model)."""
    out = {}
    for arm, curve in curves.groupby("arm"):
        sd = noise.pooled_sd(curve, sign)
        out[arm] = sd, noise.regret_floor(curve, sd, len(args.grid_seeds), sign)
    return out


def print_table(args, table: pd.DataFrame, curves: pd.DataFrame, sign: float,
                resolution: dict[str, tuple[float, float]]) -> None:  # fmt: skip
    for arm, curve in curves.groupby("arm"):
        lr, value = grid.best(curve, "dev", sign)
        sd, floor = resolution[arm]
        say(args, f"grid {arm}: best lr {lr:.3g} (mean dev {value:.4f}), "
            f"{curve.trial_epochs.sum():.0f} trial-epochs; one seed's sd {sd:.4f}, so the best "
            f"lr itself would show a mean regret of {floor:.4f} (search_noise.py)")  # fmt: skip
    print(f"{'contender':<13}{'reps':>5}{'regret dev':>19}{'regret test':>19}{'cost share':>17}"
          f"{'same draws':>12}")  # fmt: skip
    for row in table.itertuples():
        reps = f"{row.measured}/{row.repetitions}" if row.measured < row.repetitions else (
            f"{row.repetitions}"
        )  # fmt: skip
        print(f"{row.contender:<13}{reps:>5}"
              f"{row.regret_dev_mean:>10.4f} ± {row.regret_dev_std:.4f}"
              f"{row.regret_test_mean:>10.4f} ± {row.regret_test_std:.4f}"
              f"{row.cost_share_mean:>9.3f} ± {row.cost_share_std:.3f}"
              f"{row.same_draws:>12}")  # fmt: skip
    print("regret dev: the grid's best mean dev minus its mean at the chosen lr; regret test: its "
          "mean test at the dev-best lr minus at the chosen lr (below 0: the chosen lr tested "
          "better); mean ± sd over repetitions (reps a/b: only a had an lr chosen in every arm); "
          "same draws: repetitions that tried the very lrs of a contender above it")  # fmt: skip
    if args.trainable == "synthetic":
        print(NOT_A_FINDING)


def plot(args, table: pd.DataFrame, reps: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
    labels = {"dev": "dev: grid's best - at chosen lr",
              "test": "test: at grid's dev-best lr - at chosen lr"}  # fmt: skip
    for ax, (column, label) in zip(axes, labels.items(), strict=True):
        for index, row in enumerate(table.itertuples()):
            mine, color = reps[reps.contender == row.contender], f"C{index}"
            same = f" (drew another's lrs in {row.same_draws}/{row.repetitions})"
            ax.scatter(mine.cost_share, mine[f"regret_{column}"], s=10, alpha=0.35, color=color)
            ax.errorbar(row.cost_share_mean, getattr(row, f"regret_{column}_mean"),
                        xerr=row.cost_share_std, yerr=getattr(row, f"regret_{column}_std"),
                        fmt="osD^v"[index % 5], capsize=3, color=color,
                        label=row.contender + (same if row.same_draws else ""))  # fmt: skip
        ax.axhline(0.0, color="grey", linewidth=0.5)
        ax.set_xlabel("cost: trial-epochs / dense grid's")
        ax.set_ylabel(f"regret on {label}", fontsize=9)
    title = f"{args.study} ({args.profile}): search against a dense lr grid, mean ± sd"
    fig.suptitle(title if args.trainable != "synthetic" else f"{title}\n{NOT_A_FINDING}",
                 fontsize=9)  # fmt: skip
    axes[0].legend(fontsize=7)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_grid(args, curves: pd.DataFrame, reps: pd.DataFrame, path: Path) -> None:
    """The reference itself: each arm's mean dev metric over lr (± its sd over the grid's
    seeds) and mean test, the study's search range shaded, and every lr a contender chose
    marked below, so the regret table can be checked by eye."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = list(curves.groupby("arm"))
    fig, axes = plt.subplots(1, len(arms), figsize=(5 * len(arms), 4), sharey=True,
                             squeeze=False)  # fmt: skip
    for ax, (arm, curve) in zip(axes[0], arms, strict=True):
        ax.axvspan(*args.search_range, color="grey", alpha=0.12, label="study's search range")
        ax.fill_between(curve.lr, curve.dev - curve.dev_sd, curve.dev + curve.dev_sd,
                        color="C0", alpha=0.2)  # fmt: skip
        ax.plot(curve.lr, curve.dev, "o-", color="C0", label="dev (mean ± sd over seeds)")
        ax.plot(curve.lr, curve.test, "s--", color="C1", label="test (mean)")
        chosen = reps.get(f"lr {arm}", pd.Series(dtype=float)).dropna()
        ax.plot(chosen, [0.0] * len(chosen), "|", color="C3", markersize=14,
                label=f"lrs the contenders chose ({len(chosen)})")  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("learning rate")
        ax.set_title(arm, fontsize=9)
    axes[0][0].set_ylabel("metric over the grid's seeds")
    axes[0][0].legend(fontsize=7, loc="upper left")
    title = f"{args.study} ({args.profile}): the dense lr grid"
    fig.suptitle(title if args.trainable != "synthetic" else f"{title}\n{NOT_A_FINDING}",
                 fontsize=9)  # fmt: skip
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(table: pd.DataFrame, resolution: dict[str, tuple[float, float]]) -> str:
    """The table as docs/benchmarks.md shows it: mean ± sd over repetitions, and the regret
    the grid cannot resolve."""
    lines = ["| contender | repetitions | regret, dev F1 | regret, test F1 | cost share of the "
             "grid | drew another's lrs |", "|---|---|---|---|---|---|"]  # fmt: skip
    for row in table.itertuples():
        cells = [f"{getattr(row, f'{c}_mean'):.4f} ± {getattr(row, f'{c}_std'):.4f}"
                 for c in ("regret_dev", "regret_test", "cost_share")]  # fmt: skip
        reps = f"{row.measured} of {row.repetitions}" if row.measured < row.repetitions else (
            str(row.repetitions))  # fmt: skip
        lines.append(f"| {row.contender} | {reps} | {' | '.join(cells)} | {row.same_draws} |")
    floor = "; ".join(f"{arm} {f:.4f} (one seed's sd {sd:.4f})"
                      for arm, (sd, f) in resolution.items())  # fmt: skip
    lines += ["", f"The grid's own resolution, the mean dev regret its best lr itself would show "
              f"against a redrawn grid (bench/search_noise.py's model): {floor}."]  # fmt: skip
    return "\n".join(lines) + "\n"


def write_outputs(args, table, reps, curves, resolution: dict[str, tuple[float, float]]) -> None:
    prefix = "synthetic-" if args.trainable == "synthetic" else ""
    names = ("search_efficiency.csv", "search_efficiency.md", "repetitions.csv", "grid.csv",
             "search_efficiency.png", "grid.png")  # fmt: skip
    files = {name: args.out / f"{prefix}{name}" for name in names}
    table.to_csv(files["search_efficiency.csv"], index=False)
    note = f"\n{NOT_A_FINDING}\n" if args.trainable == "synthetic" else ""
    files["search_efficiency.md"].write_text(markdown(table, resolution) + note)
    reps.to_csv(files["repetitions.csv"], index=False)
    curves.to_csv(files["grid.csv"], index=False)
    plot(args, table, reps, files["search_efficiency.png"])
    plot_grid(args, curves, reps, files["grid.png"])
    say(args, "wrote " + ", ".join(str(p) for p in files.values()))
