"""Optional parts of the install: which extra brings a package, and a one-line message when it is missing.

The base install (what a Space installs) runs the app; the corpus's Ray/DuckDB/Parquet stack and the
notebook's anywidget come as extras (``pip install -e '.[corpus]'``, ``[notebook]``, ``[all]``;
pyproject.toml). A feature imports its optional packages through :func:`require`, so a missing one
says which extra to install instead of raising a traceback. The hint installs from the clone: the
package is on no index, so installing it by its name fails.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from mudiff_viz.core.errors import UserInputError

def install_hint(extra: str) -> str:
    """The command that installs ``extra`` from a clone of the repository (run in its folder)."""
    return f"pip install -e '.[{extra}]' (in the repository's folder)"


EXTRA_OF = {"pyarrow": "corpus", "duckdb": "corpus", "ray": "corpus", "anywidget": "notebook", "traitlets": "notebook"}


class MissingExtra(UserInputError):
    """An optional package a feature needs is not installed."""


def require(module: str, feature: str) -> ModuleType:
    """``import module`` for ``feature``, or a one-line MissingExtra naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        extra = EXTRA_OF.get(top, "all")
        raise MissingExtra(f"{feature} needs {top}, which is not installed: {install_hint(extra)}") from None


def available(*modules: str) -> bool:
    """Whether every module imports (the app hides a feature's controls behind its message otherwise)."""
    try:
        for m in modules:
            importlib.import_module(m)
    except ImportError:
        return False
    return True
