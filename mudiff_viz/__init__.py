"""mudiff-viz: look inside diffusion decoding of document OCR.

The public API (docs/notebook.md)::

    import mudiff_viz as mv
    trace = mv.decode("courier-short", decoder="diffusion", threshold=0.9)
    trace                      # the step player, inline in a notebook
    trace.tokens_frame()       # one row per token (the corpus store's columns)

Importing the package is cheap: the API's modules (torch, pandas, anywidget) load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from mudiff_viz.core import trace as _trace

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "decode": "mudiff_viz.notebook.api",
    "compare": "mudiff_viz.notebook.api",
    "shuffle": "mudiff_viz.notebook.api",
    "load_trace": "mudiff_viz.notebook.api",
    "models": "mudiff_viz.notebook.api",
    "from_release": "mudiff_viz.notebook.release",
    "Comparison": "mudiff_viz.notebook.comparisons",
    "ShuffleComparison": "mudiff_viz.notebook.comparisons",
    "open_store": "mudiff_viz.notebook.store",
    "Store": "mudiff_viz.notebook.store",
    "Player": "mudiff_viz.notebook.widget",
    "Trace": "mudiff_viz.core.trace",
    "UserInputError": "mudiff_viz.core.errors",
    "ModelLoadError": "mudiff_viz.core.errors",
    "samples": "mudiff_viz.notebook.sources",
}
__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mudiff_viz' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _hook(module: str, name: str):
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    return call


_trace.NOTEBOOK_HOOKS.update(
    tokens_frame=_hook("mudiff_viz.notebook.frames", "tokens_frame"),
    steps_frame=_hook("mudiff_viz.notebook.frames", "steps_frame"),
    mimebundle=_hook("mudiff_viz.notebook.widget", "mimebundle"),
    save_gif=_hook("mudiff_viz.notebook.page_images", "save_gif"),
    save_mp4=_hook("mudiff_viz.notebook.page_images", "save_mp4"),
)
