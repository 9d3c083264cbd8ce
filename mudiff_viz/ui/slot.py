"""One model slot per process: every call that runs a model holds this lock.

Gradio's ``concurrency_id="model"`` queues the Decode, Compare and Shuffle buttons one at a time,
but cached examples (on Spaces) run through an event of their own with its own slot. The lock makes
the one-slot rule hold for every path into a model, whichever Gradio event started it: two decodes
never share the CPU (or the GPU's memory) and a model is never loaded twice at once.
"""

from __future__ import annotations

import functools
import threading
from typing import Callable, TypeVar

MODEL_LOCK = threading.Lock()
MODEL_WORK = "model"  # the Gradio concurrency id every model-running event shares (one at a time)

F = TypeVar("F", bound=Callable)


def model_slot(fn: F) -> F:
    """Run ``fn`` while holding the process-wide model slot."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with MODEL_LOCK:
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
