"""Error types that carry a one-line message meant for the user.

The CLI maps them to exit codes and the app to ``gr.Error``; anything else is an internal failure.
"""


class UserInputError(ValueError):
    """The input (file, trace, option) is bad; the message says what is wrong. CLI exit code 2."""


class ModelLoadError(RuntimeError):
    """A model spec or checkpoint could not be loaded; the message says why. CLI exit code 3."""
