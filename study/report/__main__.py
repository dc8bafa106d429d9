"""`python -m study.report NAME`: the study report a researcher would put in an appendix.

    python -m study.report ner_depth                       # newest finished ner_depth study
    python -m study.report ner_depth --run-id RUN --out reports/x --tracking-uri URI

Reads the study from MLflow (`study.tracking.reading`), compares arms paired by seed on the confirm
phase under the study's declared analysis (`study.stats`), and writes `README.md`, CSV tables
and PNG plots into one folder (`study.report.build`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from study.names import tracking_uri
from study.outputs import DEFAULT_REPORTS, DEFAULT_TRACKING, stores_closed
from study.progress.log_format import LOG_DATE_FORMAT, LOG_FORMAT
from trainables.command_line import (
    EXIT_BAD_INPUT,
    OneLineParser,
    exit_codes,
    leaving_quickly,
    pipe_closed_quietly,
)
from trainables.errors import UserInputError, joined

EXAMPLES = """examples:
  python -m study.report ner_depth                      # the newest finished ner_depth study
  python -m study.report ner_depth --run-id RUN --out reports/x --tracking-uri URI
  python -m study.report ner_reinit --layers            # refuse a study without layer data

The same command is installed as `study-report`."""


def build_parser() -> OneLineParser:
    """The command line, with examples and exit codes in its help."""
    parser = OneLineParser(
        prog="python -m study.report",
        description="Write a study's report (README.md, CSV tables, PNG plots) from MLflow: the "
        "arms compared\npaired by seed on the confirm phase, under the study's declared analysis.",
        epilog=EXAMPLES + "\n\n" + exit_codes({
            0: "the report is written",
            2: "bad input: no such store, study or run, or a study the report cannot read; "
            "one line",
        }),
    )  # fmt: skip
    parser.add_argument("study", help="study name (the MLflow experiment)")
    parser.add_argument("--tracking-uri", metavar="URI",
                        help=f"MLflow tracking URI (default {DEFAULT_TRACKING})")  # fmt: skip
    parser.add_argument("--out", metavar="FOLDER",
                        help=f"report folder (default {DEFAULT_REPORTS}/<study>[-<profile>])",
                        )  # fmt: skip
    parser.add_argument("--run-id", metavar="RUN",
                        help="the study run (default: the newest finished one)")  # fmt: skip
    parser.add_argument("--layers", action="store_true",
                        help="require the cross-trial layer comparisons: refuse a study whose "
                        "trials kept no layer fingerprints")  # fmt: skip
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from study.report.build import write_report  # pandas, matplotlib, MLflow: after --help

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, datefmt=LOG_DATE_FORMAT)
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    uri = tracking_uri(args.tracking_uri)
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        print(f"error: no MLflow store at {uri}; run the study first", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        report = write_report(uri, args.study, args.out, args.run_id,
                              require_layers=args.layers)  # fmt: skip
    except UserInputError as err:
        print(f"error: {joined(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(report.summary_line())
    return 0


def command() -> int:
    """`python -m study.report` and the installed `study-report`: `main`, then an exit that skips
    the interpreter's last garbage collection, its sqlite stores closed first."""
    return leaving_quickly(stores_closed(pipe_closed_quietly(main)))


if __name__ == "__main__":
    sys.exit(command())
