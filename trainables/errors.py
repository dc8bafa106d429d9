"""Errors that carry a message fit for one line on a terminal.

The command-line entry points catch `UserInputError` and print `str(err)` with a non-zero
exit, so every message must already name the file, line, field or value at fault.
"""


class UserInputError(ValueError):
    """Bad input from the user: a file, a config field, a model or dataset name."""


class DataError(UserInputError):
    """A corpus file or dataset that cannot be read as tagged sentences."""


class ModelError(UserInputError):
    """A model path or id that cannot be loaded, or an encoder layout we cannot operate on."""


class ConfigError(UserInputError):
    """A trial or study configuration value outside what is allowed."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the trial's result would be garbage."""
