"""``spaces.GPU`` when the ``spaces`` package is present (Hugging Face Spaces), else a no-op.

Import this module before anything initialises CUDA. On ZeroGPU a decorated call runs in another
process: ``spaces`` pickles its arguments and its result. So the decorated functions take plain
data only (a loaded page, model specs, knob values: never a progress closure or a snapshot hook;
tests/test_zerogpu.py pickles the real arguments of every one of them through a stand-in
``spaces``), and return Trace objects. Their ``duration`` is a function of the same arguments:
the seconds the requested work needs (:func:`decode_seconds`), not one fixed budget.
"""

from __future__ import annotations

import os
from typing import Callable

ON_ZERO_GPU = bool(os.environ.get("SPACES_ZERO_GPU"))
DECORATED: list[str] = []  # the qualified names of every decorated call (the pickling test checks all of them)

# Seconds of GPU time per unit of work (docs/app.md#spaces): moving the weights in and the prefill,
# then per requested token (the H200 figures of docs/real-models.md, with a margin for a shared GPU).
BASE_S, PER_TOKEN_S, MIN_S, MAX_S = 20.0, 0.05, 30, 600

try:  # pragma: no cover - only on Spaces
    import spaces

    def _decorate(fn: Callable, duration) -> Callable:
        return spaces.GPU(duration=duration)(fn)

except Exception:  # ImportError, or a spaces package that cannot start here

    def _decorate(fn: Callable, duration) -> Callable:
        return fn


def gpu(fn: Callable | None = None, *, duration: int | Callable = 120) -> Callable:
    """``@gpu`` or ``@gpu(duration=...)``: ``spaces.GPU`` on a Space. ``duration`` may be a function
    of the call's arguments (``spaces`` asks it before each call)."""
    def wrap(f: Callable) -> Callable:
        DECORATED.append(f"{f.__module__}.{f.__qualname__}")
        return _decorate(f, duration)

    return wrap(fn) if fn is not None else wrap


def decode_seconds(knobs: dict, passes: int = 1) -> int:
    """GPU seconds for ``passes`` decodes of up to ``max_new_tokens`` tokens each."""
    from mudiff_viz.decoding.settings import KNOB

    tokens = int(knobs.get("max_new_tokens") or KNOB["max_new_tokens"].default)
    return int(min(MAX_S, max(MIN_S, passes * (BASE_S + PER_TOKEN_S * tokens))))


def preload_wanted() -> bool:
    """Create the models at import: on ZeroGPU (a GPU call must not spend its budget reading
    gigabytes of weights), or when ``MUDIFF_PRELOAD=1``; ``MUDIFF_PRELOAD=0`` turns it off."""
    flag = os.environ.get("MUDIFF_PRELOAD", "")
    return flag == "1" or (ON_ZERO_GPU and flag != "0")


def preload_models(specs: list[str] | None = None) -> list[tuple[str, str]]:
    """Load every configured model for each decoder family it serves, once per process (the
    registry keeps them; on ZeroGPU ``spaces`` moves their CUDA tensors onto the GPU inside each
    call). Returns the (spec, kind) pairs loaded; a spec that cannot load is left to fail, in one
    line, when a run asks for it."""
    from models import registry
    from mudiff_viz.core.errors import ModelLoadError

    loaded = []
    for spec in specs if specs is not None else registry.configured_models():
        for kind in ("diffusion", "ar"):
            try:
                registry.load_backend(spec, kind)
            except (ModelLoadError, OSError, ValueError):
                continue
            loaded.append((spec, kind))
    return loaded
