"""The model slots of a process: every call that runs a model holds one.

Gradio's ``concurrency_id="model"`` queues the Decode, Compare, Shuffle and lesson buttons, at most
:data:`~mudiff_viz.ui.capacity.DECODE_SLOTS` at a time (derived from the machine's cores and memory,
see :mod:`mudiff_viz.ui.capacity`), but cached examples (on Spaces) run through an event of their own.
The semaphore makes the rule hold for every path into a model, whichever Gradio event started it:
no more decodes share the CPU (or the GPU's memory) than the machine has room for. Models are
loaded once per process by the registry's own lock.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import inspect
import threading
from typing import Callable, TypeVar

from mudiff_viz.ui.capacity import DECODE_SLOTS

MODEL_LOCK = threading.BoundedSemaphore(DECODE_SLOTS)
MODEL_WORK = "model"  # the Gradio concurrency id every model-running event shares
_held = [0]
_count_lock = threading.Lock()


TRIM_AFTER_S = 2.0  # once every slot is free this long, the heap's free pages go back to the system


def trim_memory() -> bool:
    """Collect garbage and hand glibc's free heap pages back to the system (``malloc_trim``).

    A burst of requests leaves payloads, uploads and activations freed but still mapped: without
    this the server's RSS stayed ~10% above its warm level after a burst (docs/reliability.md).
    Returns whether anything could be trimmed (False off glibc)."""
    if slots_in_use():
        return False
    gc.collect()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):
        return False


def _trim_when_idle() -> None:
    timer = threading.Timer(TRIM_AFTER_S, trim_memory)
    timer.daemon = True
    timer.start()


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
                    idle = _held[0] == 0
                if idle:
                    _trim_when_idle()

    return wrapper  # type: ignore[return-value]


def trims_after(fn: F) -> F:
    """Trim the heap once ``fn`` (a model-free request that may hold hundreds of MB: a trace replay,
    an uploaded store) has finished, as a model slot does when it falls free; a generator is trimmed
    after its last frame. The trim still waits for every model slot to be free."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen_wrapper(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            finally:
                _trim_when_idle()

        return gen_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            _trim_when_idle()

    return wrapper  # type: ignore[return-value]
