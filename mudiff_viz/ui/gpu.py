"""``spaces.GPU`` when the ``spaces`` package is present (Hugging Face Spaces), else a no-op.

Import this module before anything initialises CUDA. On ZeroGPU a decorated call runs in a forked
worker process: ``spaces`` pickles its arguments and its result. So the decorated functions take
plain data only (a loaded page, model specs, knob values: never a progress closure or a snapshot
hook) and return Trace objects. Their ``duration`` is a function of the same arguments: the seconds
the requested work needs (:func:`decode_seconds`), never above the per-call cap (:data:`CAP_S`);
work larger than one call is split into one call per decode by the callers (docs/app.md#spaces).

``spaces`` shows any exception that is not a ``gr.Error`` as "ZeroGPU worker error: <ClassName>".
So the decorated function runs inside :func:`crossing`, which turns our errors into ``gr.Error``
with the project's one-line reason.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import replace
from typing import Callable

ON_ZERO_GPU = bool(os.environ.get("SPACES_ZERO_GPU"))
DECORATED: list[str] = []  # the qualified names of every decorated call (the stand-in test checks all of them)
LOG = logging.getLogger(__name__)

# Seconds of GPU time per unit of work (docs/app.md#spaces): moving the weights in and the prefill,
# then per requested token (the H200 figures of docs/real-models.md, with a margin for a shared GPU).
BASE_S, PER_TOKEN_S, MIN_S = 20.0, 0.05, 30
CAP_S = 300  # the longest one ZeroGPU call may ask for, as its maintainers state it
FREE_DAILY_S = 210  # a free account's GPU seconds per day: a bigger request waits for a PRO account
# What a layout-mode decode asks for: its number of blocks is known only after the layout pass, so it
# asks for a whole call and its time limit ends it inside that call (the trace then says it was cut).
LAYOUT_S = CAP_S
PRELOAD_FAILURES: list[str] = []  # one line per model that could not be created when the app was built

try:  # pragma: no cover - only on Spaces
    import spaces

    def _decorate(fn: Callable, duration) -> Callable:
        return spaces.GPU(duration=duration)(fn)

except Exception:  # ImportError, or a spaces package that cannot start here

    def _decorate(fn: Callable, duration) -> Callable:
        return fn


def crossing(fn: Callable) -> Callable:
    """``fn`` with every exception turned into ``gr.Error`` carrying our one-line reason, the only
    kind ``spaces`` hands back across its process boundary with its message."""
    import gradio as gr

    from mudiff_viz.ui.common import error_text, one_line

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except gr.Error:
            raise
        except Exception as exc:
            LOG.warning("GPU call %s failed: %s", fn.__qualname__, one_line(exc))
            raise gr.Error(error_text(one_line(exc)), print_exception=False) from None

    return call


def gpu(fn: Callable | None = None, *, duration: int | Callable = 120) -> Callable:
    """``@gpu`` or ``@gpu(duration=...)``: ``spaces.GPU`` on a Space, its errors crossing as
    ``gr.Error``. ``duration`` may be a function of the call's arguments (``spaces`` asks it before
    each call)."""
    def wrap(f: Callable) -> Callable:
        DECORATED.append(f"{f.__module__}.{f.__qualname__}")
        return _decorate(crossing(f), duration)

    return wrap(fn) if fn is not None else wrap


def pass_seconds(knobs: dict) -> float:
    """GPU seconds of one decode of up to ``max_new_tokens`` tokens (page mode: one pass)."""
    from mudiff_viz.decoding.settings import KNOB

    tokens = int(knobs.get("max_new_tokens") or KNOB["max_new_tokens"].default)
    return BASE_S + PER_TOKEN_S * tokens


def decode_seconds(knobs: dict) -> int:
    """What one decode's GPU call asks for: its passes' seconds, within [MIN_S, CAP_S]. Layout mode
    asks for a whole call (:data:`LAYOUT_S`): a pass per detected block, known only once it runs."""
    wanted = LAYOUT_S if knobs.get("mode") == "layout" else pass_seconds(knobs)
    return int(min(CAP_S, max(MIN_S, wanted)))


def over_cap(knobs: dict) -> str | None:
    """Why a decode cannot fit one GPU call's cap (it then runs with a time limit inside the call
    and its trace says where it was cut), or None."""
    if knobs.get("mode") == "layout":
        return (f"layout mode runs a pass per detected block; on ZeroGPU they share one {CAP_S} s GPU call "
                "and the decode stops at its time limit")
    wanted = pass_seconds(knobs)
    if wanted > CAP_S:
        return (f"this decode may need {wanted:.0f} s of GPU, above ZeroGPU's {CAP_S} s per call; it stops at "
                f"{CAP_S} s (lower Max tokens to avoid the cut)")
    return None


def call_limits(knobs: dict):
    """The limits a decode runs under inside its GPU call: the time limit ends it before the call
    runs out (its requested duration less the weights' move and the prefill)."""
    from mudiff_viz.core.limits import current

    limits = current()
    budget = float(decode_seconds(knobs)) - BASE_S
    return replace(limits, max_decode_seconds=min(limits.max_decode_seconds, budget))


def preload_wanted() -> bool:
    """Create the models at import: on ZeroGPU (a GPU call must not spend its budget reading
    gigabytes of weights), or when ``MUDIFF_PRELOAD=1``; ``MUDIFF_PRELOAD=0`` turns it off."""
    flag = os.environ.get("MUDIFF_PRELOAD", "")
    return flag == "1" or (ON_ZERO_GPU and flag != "0")


def preload_models(specs: list[str] | None = None) -> list[tuple[str, str]]:
    """Load every configured model for each decoder family it serves, once per process (the
    registry keeps them; on ZeroGPU ``spaces`` moves their CUDA tensors onto the GPU inside each
    call). Returns the (spec, kind) pairs loaded. A spec that cannot load is logged and kept in
    :data:`PRELOAD_FAILURES` (the app shows it); a spec without a family's weights is skipped."""
    from models import registry
    from mudiff_viz.core.errors import ModelLoadError
    from mudiff_viz.ui.common import one_line

    refusals = {entry.wrong_decoder for entry in registry.BACKEND_TYPES.values()} - {""}
    loaded = []
    for spec in specs if specs is not None else registry.configured_models():
        twins = spec in registry.SHIPPED  # an embedded pair serves both families; a directory holds one
        for kind in ("diffusion", "ar"):
            try:
                registry.load_backend(spec, kind)
            except ModelLoadError as exc:
                if str(exc) not in refusals and "cannot run the" not in str(exc):  # not merely the other family
                    _preload_failed(spec, kind, one_line(exc))
                    break
                continue
            except Exception as exc:  # noqa: BLE001 - any failure is logged and shown, never swallowed
                _preload_failed(spec, kind, one_line(exc))
                break
            loaded.append((spec, kind))
            if not twins:
                break
    return loaded


def _preload_failed(spec: str, kind: str, reason: str) -> None:
    line = f"{spec} ({kind}) could not be created when the app started: {reason}"
    LOG.error("preload: %s", line)
    PRELOAD_FAILURES.append(line)


def preload_note() -> str:
    """The app's status line about models that failed to preload ("" when none did)."""
    if not PRELOAD_FAILURES:
        return ""
    return "⚠ **Models not ready:** " + "; ".join(PRELOAD_FAILURES)
