"""Model work for the app: one decorated call per decode, and streaming of the trace as it grows.

Every call that runs a model holds the process's model slot (:mod:`mudiff_viz.ui.slot`) and is
wrapped by ``spaces.GPU`` on ZeroGPU Spaces (a plain call elsewhere); they return Trace objects,
plain CPU data. :func:`streamed` runs a decode in a worker thread and hands the caller the trace so
far whenever the caller is ready for another frame, so the player starts playing after the first
denoising step instead of after the whole page. On ZeroGPU the decode runs in another process: no frames,
just the result.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from dataclasses import replace
from typing import Callable, Iterator

import gradio as gr

from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.run import Snapshot
from mudiff_viz.notebook import api
from mudiff_viz.ui import models
from mudiff_viz.ui.gpu import ON_ZERO_GPU, call_limits, decode_seconds, gpu, over_cap
from mudiff_viz.ui.slot import model_slot

FRAME_INTERVAL_S = 0.3  # at most about three frames a second: building a frame costs the decode time
TICK_S = 1.0  # a running decode's status moves at least this often (a tick inside a long prefill or block)
LOG = logging.getLogger(__name__)
# The latest cancelled decodes, for the log and the tests: units of work (diffusion blocks, AR chunks)
# done when the viewer left and when the decode stopped. A decode stops at its next unit.
CANCELLATIONS: deque = deque(maxlen=64)


# Stop buttons: the cancel flags of the streams running for each browser session. Gradio's own
# cancel closes the run's generator only once its thread lets go of it; Stop sets the flag at once.
RUNNING: dict[str, set[threading.Event]] = {}
RUNNING_LOCK = threading.Lock()


def stop_session(session: str | None) -> int:
    """Tell every stream running for ``session`` to stop at its next unit of work; returns how many."""
    with RUNNING_LOCK:
        flags = list(RUNNING.get(session or "", ()))
    for flag in flags:
        flag.set()
    return len(flags)


class Cancelled(Exception):
    """The viewer went away (closed the tab, pressed Run again): the decode stops at its next block."""


def decode_work(page, spec: str, decoder: str, knobs: dict, progress=None, snapshot: Snapshot | None = None) -> Trace:
    """One decode of a loaded page: the public ``mv.decode``, so the app, the CLI and a notebook
    take one code path (knobs checked with the CLI's messages)."""
    models.check(spec, decoder)
    return api.decode(page, model=spec, decoder=decoder, progress=progress, snapshot=snapshot, **knobs)


@gpu(duration=lambda page, spec, decoder, knobs: decode_seconds(knobs))
def decode_on_gpu(page, spec: str, decoder: str, knobs: dict) -> Trace:
    """The decode as one ZeroGPU call: plain arguments only (they are pickled), no live frames. Its
    time limit ends it inside the duration it asked for (``gpu.call_limits``)."""
    models.check(spec, decoder)
    return api.decode(page, model=spec, decoder=decoder, limits=call_limits(knobs), **knobs)


@gpu(duration=lambda page, model, decoder, params: decode_seconds(params.knobs()))
def page_on_gpu(page, model: str, decoder: str, params) -> Trace:
    """One decode of the Shuffle tab or its benchmark as its own ZeroGPU call (the probes' decode
    arguments: a loaded page, a spec, the decoder, checked params), so no call outgrows the cap."""
    models.check(model, decoder)
    knobs = params.knobs()
    limits = call_limits(knobs)
    if params.max_seconds is not None:
        limits = replace(limits, max_decode_seconds=min(limits.max_decode_seconds, params.max_seconds))
    return api.decode(page, model=model, decoder=decoder, record=params.record, limits=limits, **knobs)


def page_decoder():
    """What the probes decode a page with: one GPU call per decode on ZeroGPU, else their own default (None)."""
    if not ON_ZERO_GPU:
        return None
    return lambda page, model, decoder, params, progress=None: page_on_gpu(page, model, decoder, params)


def say_over_cap(knobs: dict) -> None:
    """Before a GPU call that cannot hold the whole decode: say so (the trace will show where it was cut)."""
    if note := over_cap(knobs):
        LOG.info("GPU call over the cap: %s", note)
        gr.Info(note)


@model_slot
def decode_job(page, spec: str, decoder: str, knobs: dict, progress=None, snapshot: Snapshot | None = None) -> Trace:
    """A decode for the app: on ZeroGPU one pickled GPU call (no progress, no frames), elsewhere in
    this process with its progress and snapshot hooks."""
    if ON_ZERO_GPU:
        say_over_cap(knobs)
        return decode_on_gpu(page, spec, decoder, knobs)
    return decode_work(page, spec, decoder, knobs, progress, snapshot)


@model_slot
def compare_job(page, plan: list[tuple[str, str, dict]], knobs: dict) -> list[Trace]:
    """Every decode of the Compare tab at once; on ZeroGPU one GPU call per decoder, so each
    asks for its own decode's seconds and stays under the per-call cap."""
    if ON_ZERO_GPU:
        for knobs_of in {repr(own): {**knobs, **own} for _, _, own in plan}.values():  # each note once
            say_over_cap(knobs_of)
        return [decode_on_gpu(page, spec, decoder, {**knobs, **own}) for decoder, spec, own in plan]
    return [decode_work(page, spec, decoder, {**knobs, **own}) for decoder, spec, own in plan]


def streamed(job: Callable[[Snapshot | None], Trace], interval_s: float = FRAME_INTERVAL_S,
             stream: bool = True, tick_s: float | None = None,
             session: str | None = None) -> Iterator[tuple[bool, Trace | None]]:
    """Run ``job(snapshot)`` and yield ``(False, trace so far)`` frames while it runs, then ``(True, trace)``.

    With ``tick_s``, a stretch of ``tick_s`` seconds without a frame (the prefill of a long page, one
    long block) yields ``(False, None)``: a tick, so the caller's status can still move.

    A frame is built only when the consumer has taken the previous one and ``interval_s`` has
    passed, so a slow browser never makes the decode queue up frames. If the consumer stops
    iterating (the generator is closed), or :func:`stop_session` names its ``session``, the decode is
    told to stop at its next block.
    """
    if not stream or ON_ZERO_GPU:
        yield True, job(None)
        return
    frames: queue.Queue = queue.Queue()
    ready = threading.Event()
    ready.set()
    cancelled = threading.Event()
    last = [0.0]
    units = [0]  # units of work finished (one snapshot each)
    left_at: list[int] = []
    outcome: dict = {}

    def snapshot(make: Callable[[], Trace]) -> None:
        if cancelled.is_set():
            raise Cancelled()
        units[0] += 1
        now = time.monotonic()
        if ready.is_set() and now - last[0] >= interval_s:
            ready.clear()
            last[0] = now
            frames.put(("frame", make()))

    def work() -> None:
        try:
            outcome["trace"] = job(snapshot)
        except Cancelled:
            record = {"units_at_cancel": left_at[0] if left_at else units[0], "units_at_stop": units[0]}
            CANCELLATIONS.append(record)
            LOG.info("decode cancelled: the viewer left after %(units_at_cancel)d units of work, "
                     "it stopped after %(units_at_stop)d", record)
        except BaseException as exc:  # handed to the consumer's thread
            outcome["error"] = exc
        finally:
            frames.put(("end", None))

    worker = threading.Thread(target=work, name="mudiff-decode", daemon=True)
    if session:
        with RUNNING_LOCK:
            RUNNING.setdefault(session, set()).add(cancelled)
    worker.start()
    ended = False
    try:
        while True:
            try:
                kind, trace = frames.get(timeout=tick_s)
            except queue.Empty:
                yield False, None
                continue
            if kind == "end":
                ended = True
                break
            yield False, trace
            ready.set()
    finally:
        if not ended:  # closed early: the viewer went away (Gradio closes the generator) or pressed Run again
            left_at.append(units[0])
            cancelled.set()
        if session:
            with RUNNING_LOCK:
                RUNNING.get(session, set()).discard(cancelled)
                if not RUNNING.get(session):
                    RUNNING.pop(session, None)
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    if "trace" in outcome:  # else stopped (stop_session): the caller sees the frames end without a result
        yield True, outcome["trace"]


def ticking(job: Callable[[Callable[[], None]], object], interval_s: float = TICK_S) -> Iterator[tuple[bool, object]]:
    """Run ``job(check)`` in a worker thread; yield ``(False, None)`` every ``interval_s`` while it runs
    (the caller redraws its status from state the job updates, so it moves even when one unit of
    work is long), then ``(True, result)``.

    For work that is not one trace (the Shuffle tab's four decodes). The job calls ``check()`` at
    each unit of work; once the consumer stops iterating, it raises :class:`Cancelled`.
    """
    done = threading.Event()
    cancelled = threading.Event()
    outcome: dict = {}

    def check() -> None:
        if cancelled.is_set():
            raise Cancelled()

    def work() -> None:
        try:
            outcome["result"] = job(check)
        except Cancelled:
            LOG.info("work cancelled: the viewer left")
        except BaseException as exc:  # handed to the consumer's thread
            outcome["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=work, name="mudiff-work", daemon=True)
    worker.start()
    try:
        while not done.wait(interval_s):
            yield False, None
    finally:
        if not done.is_set():
            cancelled.set()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    yield True, outcome["result"]
