"""The model slots of a process: every call that runs a model holds one.

Gradio's ``concurrency_id="model"`` queues the Decode, Compare, Shuffle and lesson buttons, at most
:data:`~mudiff_viz.ui.capacity.DECODE_SLOTS` at a time (derived from the machine's cores and memory,
see :mod:`mudiff_viz.ui.capacity`), but cached examples (on Spaces) run through an event of their own.
The semaphore makes the rule hold for every path into a model, whichever Gradio event started it:
no more decodes share the CPU (or the GPU's memory) than the machine has room for. Models are
loaded once per process by the registry's own lock.
"""

from __future__ import annotations

import functools
import threading
from typing import Callable, TypeVar

from mudiff_viz.ui.capacity import DECODE_SLOTS

MODEL_LOCK = threading.BoundedSemaphore(DECODE_SLOTS)
MODEL_WORK = "model"  # the Gradio concurrency id every model-running event shares
_held = [0]
_count_lock = threading.Lock()


def slots_in_use() -> int:
    """Model slots held right now (a cancelled decode gives its slot back when it stops)."""
    return _held[0]

F = TypeVar("F", bound=Callable)


def model_slot(fn: F) -> F:
    """Run ``fn`` while holding one of the process's model slots."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with MODEL_LOCK:
            with _count_lock:
                _held[0] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                with _count_lock:
                    _held[0] -= 1

    return wrapper  # type: ignore[return-value]
