"""The study command's line: its flags, examples and exit codes, and the checks of a flag
combination, apart from the driver that runs what it parses (study/run.py). `arguments` gives
the same parse to a Python caller (study/runner.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from study.catalog import help_table, study_entries
from study.outputs import DEFAULT_REPORTS, DEFAULT_STORAGE, DEFAULT_TRACKING
from trainables.command_line import EXIT_BAD_INPUT, OneLineParser, add_set_option, exit_codes
from trainables.errors import UserInputError

# exit codes: what a script or a scheduler running the study can act on
EXIT_OK = 0
EXIT_FAILED = 1  # the study ran but has no report: every trial failed, Tune or the report failed
EXIT_STORAGE = 3  # the storage is full or does not answer: fix that, then --resume
EXIT_INTERRUPTED = 130  # Ctrl-C or a stopped phase; the state is saved, --resume continues


EXAMPLES = """examples:
  python -m study.run --list                            # the studies, their profiles and files
  python -m study.run ner_depth --dry-run               # check the data, print the plan
  python -m study.run ner_depth --profile smoke         # a few minutes' check of the whole path
  python -m study.run ner_depth                         # the embedded default, on this machine
  python -m study.run ner_depth --resume                # continue the newest interrupted run
  python -m study.run ner_depth --profile cluster --address auto --storage s3://bucket/x
  python -m study.run ~/ner/s.yaml --set fixed.epochs=5 --set data.train=~/ner/train.txt

A study name is looked up as a path (NAME.yaml or holding a /), then in ./search_spaces/,
then among the studies shipped with the package. The same command is installed as `study-run`."""

EXIT_CODES = {
    EXIT_OK: "the study finished and its report is written (or --dry-run / --list printed)",
    EXIT_FAILED: "the study ran but no report was written: every trial failed, Ray Tune "
    "stopped it, or\n       the report failed; one line says why (and how to make the report "
    "again), the\n       study's runs stay in MLflow",
    EXIT_BAD_INPUT: "bad input: the study file, a flag or a server; one line says which and "
    "why,\n       and nothing is written",
    EXIT_STORAGE: "the storage is full or does not answer: fix that, then --resume",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C, SIGTERM or a stopped phase): the state is saved, "
    "--resume continues",
}


class _RunParser(OneLineParser):
    """The study command's parser. Its help lists the studies found, read when the help is
    shown: reading every study file on each parse would cost a command that runs one study."""

    def __init__(self, folder: Path | None, **options: Any) -> None:
        super().__init__(**options)
        self.studies_folder = folder

    def format_help(self) -> str:
        studies = (
            "studies found (python -m study.run --list describes them), with their profiles:\n"
        )
        found = help_table(study_entries(self.studies_folder))
        self.epilog = "\n\n".join([EXAMPLES, exit_codes(EXIT_CODES), studies + found])
        return super().format_help()


def build_parser(folder: Path | None = None) -> OneLineParser:
    """The command line; its help lists the studies found (in `folder` alone when given, as
    docs/cli.md does for the shipped ones)."""
    parser = _RunParser(
        folder,
        prog="python -m study.run",
        description="Run a study on Ray Tune, tracked in MLflow: explore (Optuna samples per arm, "
        "ASHA pruning),\nthen confirm (the chosen sample of each arm on held-out seeds), then "
        "the report.",
    )
    parser.add_argument(
        "study", nargs="?", help="study name (see the list below) or a study file's path"
    )
    parser.add_argument("--list", action="store_true", help="list the studies and exit")
    parser.add_argument(
        "--profile", default="default",
        help="profile in the study file (default: 'default', else the file as it is)",
    )  # fmt: skip
    parser.add_argument("--address", help="Ray cluster to join: 'auto' or HOST:PORT")
    parser.add_argument("--resume", action="store_true", help="continue the newest run")
    parser.add_argument("--wait", action="store_true",
                        help="when another driver runs this study on this storage, wait for it "
                        "to finish instead of refusing")  # fmt: skip
    parser.add_argument("--dry-run", action="store_true",
                        help="read and check the data as a run does, print the plan and exit; "
                        "writes nothing")  # fmt: skip
    parser.add_argument("--max-concurrent", type=int, metavar="N", help="trials running at once")
    parser.add_argument("--tracking-uri", metavar="URI",
                        help=f"MLflow tracking URI (default {DEFAULT_TRACKING})")  # fmt: skip
    parser.add_argument("--storage", default=DEFAULT_STORAGE, metavar="PATH_OR_URI",
                        help=f"Ray results: path or URI (default {DEFAULT_STORAGE})")  # fmt: skip
    parser.add_argument("--num-cpus", type=int, metavar="N",
                        help="CPUs for a local Ray (default: all)")  # fmt: skip
    parser.add_argument(
        "--reports", default=DEFAULT_REPORTS, metavar="FOLDER",
        help=f"where the report folder goes (default {DEFAULT_REPORTS}; 'none': no report at the "
        "end, python -m study.report makes it later)",
    )  # fmt: skip
    add_set_option(parser, "a study-file setting: a dotted KEY such as fixed.epochs")
    parser.add_argument("--verbose", action="store_true", help="also show Ray's own output")
    parser.add_argument(
        "--optuna-storage", metavar="URL",
        help="Optuna storage URL for the explore samples, or 'none' (default: optuna.db beside "
        "a sqlite MLflow store, else in a local --storage folder)",
    )  # fmt: skip
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, its wrong combinations refused in one line (exit 2) before anything
    is read or started."""
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = _flag_problem(args)
    if problem:
        parser.error(problem)
    return args


def arguments(study: str, **options: Any) -> argparse.Namespace:
    """What the command line `python -m study.run STUDY` would parse to, with `options` by
    their argparse names (profile, overrides, tracking_uri, ...; None: the flag's default) in
    place of flags: how `study.runner` runs a study as the command does. A wrong option or
    combination raises UserInputError with the line the command would print."""
    args = build_parser().parse_args([])  # every flag at its default
    known = set(vars(args)) - {"study", "list"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise UserInputError(f"no option {', '.join(unknown)}; the options are "
                             f"{', '.join(sorted(known))}")  # fmt: skip
    vars(args).update({key: value for key, value in options.items() if value is not None})
    args.study = study
    problem = _flag_problem(args)
    if problem:
        raise UserInputError(problem)
    return args


def _flag_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with this combination of flags, in a few words; None when nothing."""
    if args.list:
        return "--list takes no study name" if args.study else None
    if not args.study:
        return "name a study (python -m study.run --list shows them) or a study file"
    if args.resume and args.dry_run:
        return "--dry-run prints the plan of a new run: drop --resume (or --dry-run)"
    if args.address and args.num_cpus is not None:
        return "--num-cpus sizes a local Ray: a cluster joined with --address has its own CPUs"
    for flag, value in (("--max-concurrent", args.max_concurrent), ("--num-cpus", args.num_cpus)):
        if value is not None and value < 1:
            return f"{flag} {value}: expected >= 1"
    return None
