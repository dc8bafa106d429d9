"""The argparse pieces every command of the project shares (`python -m study.run`,
`python -m study.report`, `python -m trainables`), so that they read and fail alike: a bad
command line is one `error:` line and exit 2, as a bad study file is, and `--set` means the same
everywhere (repeatable, one KEY=VALUE each)."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

EXIT_BAD_INPUT = 2  # a flag, a file or a server is wrong: one line says which and why
EXIT_PIPE_CLOSED = 141  # a Unix filter's status when its reader goes first (128 + SIGPIPE)
HELP_WIDTH = 100  # fixed, so that `--help` and docs/cli.md do not depend on the terminal


class OneLineParser(argparse.ArgumentParser):
    """argparse, except that a wrong command line is one `error:` line, not a usage dump: a
    script or a scheduler reads the same form from every mistake the commands refuse."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _formatter)
        super().__init__(**kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see {self.prog} --help)\n")


def _formatter(prog: str) -> argparse.HelpFormatter:
    """Examples and exit codes in the epilog keep their lines; the width is fixed."""
    return argparse.RawDescriptionHelpFormatter(prog, width=HELP_WIDTH)


def add_set_option(parser: argparse.ArgumentParser, what: str) -> None:
    """`--set KEY=VALUE`, repeatable, into `args.overrides` in the order given; `what` says
    what a KEY names for this command."""
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help=f"override {what}; the VALUE is read as YAML (3e-5 a number, off a word); "
        "repeatable, one KEY=VALUE each",
    )  # fmt: skip


def leaving_quickly(code: int) -> int:
    """`code`, once every object the process holds is frozen, so that the interpreter's last
    garbage collection, at exit, walks none of them. After a study, a report or an export the
    process holds torch, transformers, Ray, MLflow and pandas, and that collection took a
    second of the command's wall time to free memory the operating system takes back anyway
    (bench/study_overhead.py). Only a command's entry point calls it, as it returns: a caller
    that goes on would keep every frozen object until it exits."""
    gc.freeze()
    return code


def pipe_closed_quietly(main: Callable[[], int]) -> int:
    """`main()`, except that a reader that stops early (`--list | head -1`) ends the command
    as it ends any Unix filter, quietly, not with a BrokenPipeError traceback. Its output is
    flushed here, inside the catch, and stdout then points at /dev/null, so that the
    interpreter's own flush at exit finds no closed pipe either."""
    try:
        code = main()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE_CLOSED


def exit_codes(codes: dict[int, str]) -> str:
    """The epilog's exit-code table."""
    return "exit codes:\n" + "\n".join(f"  {code:<4} {text}" for code, text in codes.items())


TRIAL_EXAMPLES = """examples:
  python -m trainables --set lr=1.78e-4 --set "budget={steps: 630}" --set eval_every=53
      # the embedded MiniLM on WNUT-16 as ner_depth's default trial: a line every 53 steps;
      # dev F1 0.54 +- 0.02 over its 10 seeds (one epoch of 105 steps learns nothing yet)
  python -m trainables --config trial.yaml --set seed=3 --metrics-out m.jsonl
  python -m trainables --config trial.yaml --checkpoint-dir ckpt     # saved at every evaluation
  python -m trainables --config trial.yaml --checkpoint-dir ckpt --resume   # continue it

The same command is installed as `trainables-run`."""


def trial_parser() -> OneLineParser:
    """`python -m trainables`'s command line, with examples and exit codes in its help;
    torch-free, so its docs page is made without loading torch."""
    parser = OneLineParser(
        prog="python -m trainables",
        description="Train one tagger trial (no Ray, no MLflow) from a YAML file of trial "
        "settings\nand --set overrides; print its dev and test F1.",
        epilog=TRIAL_EXAMPLES + "\n\n" + exit_codes({
            0: "the trial finished (its F1 printed)",
            2: "bad input (a flag, the YAML file, a setting) or a diverged trial: one line",
        }),
    )  # fmt: skip
    parser.add_argument(
        "--config", metavar="FILE", help="YAML file of trial settings (TrialConfig fields)"
    )
    add_set_option(parser, "a trial setting (a TrialConfig field: lr, epochs, seed, ...)")
    parser.add_argument(
        "--checkpoint-dir", metavar="DIR", help="save the full state here at every evaluation"
    )
    parser.add_argument("--resume", action="store_true", help="continue from --checkpoint-dir")
    parser.add_argument(
        "--metrics-out", metavar="FILE", help="append every evaluation's metrics as JSON lines"
    )
    return parser


def write_or_check(page: Path, text: str, command: str, check: bool) -> int:
    """A generated docs page: written, or with `check` compared (exit 1 when it is stale), so
    every generator and its test agree on what "current" means. An installed package has no
    docs/ beside it: one line says so (exit 2), not a traceback or a stale page."""
    if not page.parent.is_dir():
        print(f"error: {page.parent} does not exist: {command} writes and checks the docs of a "
              "checkout of ner-depth-study, and this one runs from an installed package; run it "
              "in the checkout", file=sys.stderr)  # fmt: skip
        return EXIT_BAD_INPUT
    if check:
        current = page.read_text(encoding="utf-8") if page.is_file() else ""
        if current != text:
            print(f"{page} is not current: run {command}", file=sys.stderr)
            return 1
        return 0
    page.write_text(text, encoding="utf-8")
    print(f"wrote {page}")
    return 0
