"""`python -m trainables`: train one trial from a YAML file and `--set` overrides, without Ray
or MLflow (docs/study-files.md). Each evaluation is logged, and with `--checkpoint-dir` saved,
so an interrupted run continues with `--resume`; bad input is one `error:` line and exit 2.
`python -m trainables` is the same command under its older name."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from trainables.command_line import leaving_quickly, pipe_closed_quietly, trial_parser
from trainables.errors import TrainingDiverged, UserInputError, joined
from trainables.input_files import MAX_SETTINGS_BYTES, read_bounded
from trainables.settings.config import TrialConfig
from trainables.settings.stage_config import STAGE_KEY, stage_prefix
from trainables.yaml_reading import load_yaml, parse_value

if TYPE_CHECKING:  # the trainer loads torch: imported once the command line is read (--help)
    from trainables.training.stages import StagedTrial
    from trainables.training.train import Trial

log = logging.getLogger("trainables.training.train")  # the logger a trial's own lines go to
# what main turns into one `error:` line and exit 2
BAD_INPUT = (UserInputError, TrainingDiverged, FileNotFoundError, yaml.YAMLError)


def _parse_overrides(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise UserInputError(f"--set {pair!r}: expected KEY=VALUE")
        out[key] = parse_value(value)  # as YAML: `3e-3` a number, `off` a word
    return out


def read_settings(config: str | None, pairs: list[str]) -> TrialConfig:
    """The trial's settings from `--config FILE` and `--set KEY=VALUE`, checked; bad input is
    a UserInputError (or a YAML error) naming the file or the option."""
    try:
        limits = {"what": "a trial's settings file", "max_bytes": MAX_SETTINGS_BYTES}
        text = read_bounded(config, f"--config {config}", **limits) if config else None
        values = load_yaml(text.decode("utf-8")) if text is not None else None
    except UnicodeDecodeError as err:
        raise UserInputError(f"--config {config}: cannot read it: {joined(err)}") from None
    if values is None:
        values = {}
    if not isinstance(values, dict) or not all(isinstance(key, str) for key in values):
        raise UserInputError(f"{config}: expected a mapping of trial settings (lr: 3.0e-5, ...)")
    values.update(_parse_overrides(pairs))
    return TrialConfig.from_dict(values)


def _run_logged(
    trial: Trial | StagedTrial, checkpoint_dir: str | None, metrics_out: str | None
) -> dict:
    """Run to the end, logging each evaluation and saving state after each one."""
    metrics: dict = {}
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(Path(metrics_out).open("a")) if metrics_out else None
        for metrics in trial.run():
            # an intermediate stage's metrics are `stage<i>_<name>`, the target's plain
            at = stage_prefix(int(metrics[STAGE_KEY])) if STAGE_KEY in metrics else ""
            log.info(
                "%sstep %d  epoch %.2f  train_loss %.4f  dev_f1 %.4f",
                at,
                metrics["step"],
                metrics[f"{at}epoch"],
                metrics[f"{at}train_loss"],
                metrics[f"{at}dev_f1"],
            )
            if checkpoint_dir:
                trial.save(checkpoint_dir)
            if out:
                out.write(json.dumps(metrics) + "\n")
                out.flush()
    return metrics


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, its wrong combinations refused in one line (exit 2)."""
    parser = trial_parser()
    args = parser.parse_args(argv)
    if args.resume and not args.checkpoint_dir:
        parser.error("--resume continues from a saved state: give its --checkpoint-dir")
    if args.resume and not _holds_files(Path(args.checkpoint_dir)):
        parser.error(f"--resume: {args.checkpoint_dir} holds no saved state; run once without "
                     "--resume to make one")  # fmt: skip
    return args


def first_line(settings: TrialConfig) -> str:
    """What the command says at once, before torch, the model and the data load (seconds to
    a minute) and the first evaluation (at the end of the first epoch unless eval_every says
    sooner: minutes on a CPU): the trial it trains, and what comes next."""
    budget = _budget_words(settings)
    every = f"every {settings.eval_every} steps" if settings.eval_every else "at each epoch's end"
    return (f"one trial: model {settings.model}, lr {settings.lr:g}, {budget}, seed "
            f"{settings.seed}; loading torch, the model and the data, then a line per "
            f"evaluation ({every})")  # fmt: skip


def _budget_words(settings: TrialConfig) -> str:
    """`3 epochs`, `630 steps` or `until dev plateaus, at most 8 epochs`."""
    budget = settings.parsed_budget()
    if budget is not None and budget.steps is not None:
        return f"{budget.steps} steps"
    if budget is not None and budget.until_plateau is not None:
        return f"until dev plateaus, at most {budget.until_plateau.max_epochs} epochs"
    return f"{settings.epochs} epoch{'s' if settings.epochs != 1 else ''}"


def _holds_files(folder: Path) -> bool:
    """Checked before the model and data load, which take seconds."""
    return folder.is_dir() and any(folder.iterdir())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    started = time.time()
    try:
        settings = read_settings(args.config, args.overrides)  # refused before torch loads
        log.info("%s", first_line(settings))  # within a second; the next one takes minutes
        from trainables.training.trials import new_trial  # torch and transformers: seconds

        trial = new_trial(settings)
        if args.resume:
            trial.restore(args.checkpoint_dir)
        metrics = _run_logged(trial, args.checkpoint_dir, args.metrics_out)
    except BAD_INPUT as err:
        print(f"error: {joined(err)}", file=sys.stderr)
        return 2
    if metrics.get("final"):
        print(
            f"dev F1 {metrics['dev_f1']:.4f}  test F1 {metrics['test_f1']:.4f}  "
            f"(strict {metrics['dev_f1_strict']:.4f} / {metrics['test_f1_strict']:.4f})  "
            f"steps {trial.step}  wall {time.time() - started:.0f}s"
        )
    return 0


def command() -> int:
    """`python -m trainables` and the installed `trainables-run`: `main`, then an exit that skips
    the interpreter's last garbage collection."""
    return leaving_quickly(pipe_closed_quietly(main))


if __name__ == "__main__":
    sys.exit(command())
