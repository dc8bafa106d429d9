"""Errors that carry a message fit for one line on a terminal.

The command-line entry points catch `UserInputError` and print `str(err)` with a non-zero
exit, so every message must already name the file, line, field or value at fault, and
`printable` is how any text a user wrote reaches the terminal.
"""

import unicodedata


class UserInputError(ValueError):
    """Bad input from the user: a file, a config field, a model or dataset name."""


class DataError(UserInputError):
    """A corpus file or dataset that cannot be read as tagged sentences."""


class ModelError(UserInputError):
    """A model path or id that cannot be loaded, or an encoder layout we cannot operate on."""


class ConfigError(UserInputError):
    """A trial or study configuration value outside what is allowed."""


class SettingError(ConfigError):
    """A trial setting that cannot run: `setting` is its name, `path` where inside its value
    (`until_plateau`, `patience`) and `reason` what is wrong there, so a study's driver can
    point at the study file's line. Rebuilt from `path` and `reason` when copied or pickled:
    Ray copies a trial's error in the trial's process and unpickles it in the driver's, and an
    error that cannot be rebuilt reaches the driver as an unrelated TypeError."""

    setting = ""

    def __init__(self, path: tuple[str | int, ...], reason: str):
        self.path, self.reason = tuple(path), joined(reason)
        super().__init__(f"trial setting {self.setting}{self.dotted_path()}: {self.reason}")

    def dotted_path(self) -> str:
        return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in self.path)

    def __reduce__(self):
        return type(self), (self.path, self.reason)


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the trial's result would be garbage. Its message ends
    with INVALID, whichever trainable raised it."""

    INVALID = "the trial's results are invalid"


def first_line(err: BaseException, limit: int | None = None) -> str:
    """The first non-blank line of an error from a library (whose messages can run to pages),
    or its type's name when it has none."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0][:limit] if lines else type(err).__name__


def joined(text: object) -> str:
    """A message of our own on one line: every line break and run of spaces made one space,
    and any other control character shown escaped (`printable`)."""
    return printable(" ".join(str(text).split()))


def printable(text: object, *, lines: bool = False) -> str:
    """Text fit for a terminal: every character that is not printable (an ANSI escape's ESC,
    BEL, a backspace or carriage return, the other C0 and C1 controls, a bidirectional
    override) shown as Python writes it in a string, `\\x1b`, `\\x07`, `\\u202e`, so a
    study's description or a metric name cannot recolour, ring or rewrite the terminal. With
    `lines`, line breaks and tabs stay as they are, for a text of several lines (the plan,
    the log). The one helper for user text the product prints."""
    text = str(text)
    if text.isprintable():
        return text
    kept = "\n\t" if lines else ""
    return "".join(c if _shown_as_is(c, kept) else c.encode("unicode_escape").decode("ascii")
                   for c in text)  # fmt: skip


def _shown_as_is(c: str, kept: str) -> bool:
    # a space of any width (a no-break space) is harmless; a line or paragraph separator is not
    return c.isprintable() or c in kept or unicodedata.category(c) == "Zs"
