"""The driver's log line, `HH:MM:SS logger.name: message`: one definition for `study.run` and
`study.report`, and for bench/study_overhead.py, which reads a study's timeline from the
timestamps and logger names of those lines (its test formats lines with these). A line's
control characters (a study's description, a metric or arm name with an ANSI escape or BEL)
are shown escaped (`trainables.errors.printable`); its line breaks stay."""

import logging

from trainables.errors import printable

LOG_FORMAT = "%(asctime)s %(name)s: %(message)s"
LOG_DATE_FORMAT = "%H:%M:%S"


class PrintableFormatter(logging.Formatter):
    """LOG_FORMAT lines with their control characters escaped, line breaks kept."""

    def __init__(self) -> None:
        super().__init__(LOG_FORMAT, LOG_DATE_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), lines=True)


def log_to_terminal() -> None:
    """The driver's logging: INFO and above to stderr, one `PrintableFormatter` line each; as
    `logging.basicConfig`, nothing where the root logger has a handler already."""
    handler = logging.StreamHandler()
    handler.setFormatter(PrintableFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[handler])
