"""What one decode accumulates, shared by both decoders: the clock, each region's state, the
stopping criteria and the observers.

A decoder loop asks the backend for logits and its policy for decisions, then tells the run what
happened: ``step`` (one forward's decisions, passed to the observers), ``advance`` (forwards done:
the clock moves on), ``commit_pass`` (a block stored in the cache), ``block_done`` (a unit of work
ended). ``halt`` asks the stopping criteria before the next unit of work; ``finish`` builds the trace.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from models.mineru_common.device import graphs_choice
from mudiff_viz.core.trace import StepRecord, Trace
from mudiff_viz.core.types import Region
from mudiff_viz.decoding.build import SPECULATION, build_trace
from mudiff_viz.decoding.observers import (DecodeObserver, Progress, ProgressFn, Snapshot, StepEvent, StepRecorder,
                                           Streaming)
from mudiff_viz.decoding.settings import DecodeParams, model_options, with_model_knobs
from mudiff_viz.decoding.stopping import stopping_for


class Clock:
    """Wall-clock time of each forward on the shared clock (``times[i]``: when forward ``i`` finished),
    taken at the loop's own sync points; ``DecodeRun.advance`` appends them."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.times: list[float] = []
        self.prefill_s = 0.0

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def mark_prefill(self) -> None:
        self.prefill_s = self.now()

    def time_of(self, forward: int) -> float:
        return self.times[forward] if forward < len(self.times) else (self.times[-1] if self.times else 0.0)


@dataclass
class RegionState:
    """One region's decode so far (nano-vllm's sequence): committed ids with their forward and
    confidence, whether it stopped, and how many positions were generated (filler included)."""

    ids: list[int] = field(default_factory=list)
    commit_forward: list[int] = field(default_factory=list)
    confidence: list[float] = field(default_factory=list)
    stopped: bool = False

    @property
    def n_generated(self) -> int:
        return len(self.ids)

    def extend(self, ids: list[int], forwards: list[int], confidences: list[float]) -> None:
        self.ids.extend(ids)
        self.commit_forward.extend(forwards)
        self.confidence.extend(confidences)

    def release_cut_moves(self, kept: int, order: tuple[int, ...]) -> bool:
        """Whether the release's generate would keep other tokens than ours beyond the stop token itself:
        it searches its stop tokens in ``order`` (<|endoftext|> first) and cuts before the first hit of
        the first one found, so an <|endoftext|> after an earlier <|im_end|> in the last block moves
        its cut past ours (``kept``: our count, up to and including the first stop token)."""
        for stop in order:
            if stop in self.ids:
                return self.ids.index(stop) >= kept
        return False

    def cut_at_stop(self, stop_ids: frozenset[int]) -> "RegionState":
        """The tokens up to and including the first stop token (the rest is block filler)."""
        cut = next((k + 1 for k, t in enumerate(self.ids) if t in stop_ids), len(self.ids))
        return RegionState(self.ids[:cut], self.commit_forward[:cut], self.confidence[:cut], self.stopped)


class DecodeRun:
    """The shared state of one decode of ``regions`` of ``page``."""

    def __init__(self, decoder: str, backend, page, regions: list[Region], params: DecodeParams,
                 observers: list[DecodeObserver] = (), verifier=None) -> None:
        self.decoder = decoder
        self.backend = backend
        self.verifier = verifier  # the AR model that verifies another's drafts (the speculative decoder)
        self.page = page
        self.regions = regions
        self.params = params = with_model_knobs(params, *([backend, verifier] if verifier else [backend]))
        self.clock = Clock()
        self.states = [RegionState() for _ in regions]
        self.recorder = StepRecorder() if params.record else None
        self.observers = ([self.recorder] if self.recorder else []) + list(observers)
        self.forward = 0  # the shared clock: one index per batched forward
        self.seq_forwards = 0  # forwards per sequence (a batched forward of b rows counts b)
        self.commit_passes = 0
        self.batched_forwards = 0
        self.truncated: str | None = None
        self.extra_params: dict = {}  # what the loop adds to the trace's params (e.g. the prefill block)
        self.ctx = None  # the backend's context, once encoded
        self.generator = torch.Generator(device=backend.device).manual_seed(params.seed)
        self.stop_set = (verifier or backend).stop_ids  # whose decode the tokens are: the verifier's, if any
        self.stop_ids = torch.tensor(sorted(self.stop_set), device=backend.device, dtype=torch.long)
        self.stopping = stopping_for(params, self.stop_ids)
        self.speculation: dict[str, int] | None = None  # draft and verify: forwards and drafts counted
        self.frames_per_step = False  # the loop syncs with the host after every step anyway: stream each one

    @property
    def steps(self) -> list[StepRecord]:
        return self.recorder.steps if self.recorder else []

    def encode(self, backend, block_length: int | None = None):
        """``backend.encode`` of this run's page and regions, with the model knobs it takes
        (settings.model_options: e.g. the nano pairs' glyph anchoring reach)."""
        return backend.encode(self.page, self.regions, block_length=block_length, **model_options(self.params, backend))

    def prefill_done(self) -> None:
        """The vision encoder and prompt prefill are over: the clock's prefill mark."""
        sync(self.backend.device)
        self.clock.mark_prefill()
        for o in self.observers:
            o.on_prefill(self)

    def alive(self) -> list[int]:
        return [i for i, s in enumerate(self.states) if not s.stopped]

    def generated(self) -> int:
        return max((s.n_generated for s in self.states), default=0)

    def halt(self, generated: int | None = None) -> bool:
        """Ask the stopping criteria before the next unit of work: True ends the decode. ``generated``:
        the tokens the decode has made so far (default: the most any region has; a decode whose rows
        move at different speeds passes the least an unfinished row has)."""
        stop = self.stopping.halt(self.generated() if generated is None else generated, self.clock.now())
        if stop and stop.truncated:
            self.truncated = stop.reason
        return stop is not None

    def step(self, event: StepEvent) -> None:
        """One forward's decisions (on the device), for the observers."""
        for o in self.observers:
            o.on_step(self, event)

    def advance(self, seq_forwards: int, batched_forwards: int, times: list[float]) -> None:
        """Forwards are done: count them and put each on the clock at its finishing time."""
        self.seq_forwards += seq_forwards
        self.batched_forwards += batched_forwards
        self.clock.times.extend(times)
        self.forward += len(times)

    def count_speculation(self, **counts: int) -> None:
        """Draft and verify (build.py SPECULATION): forwards (per sequence) that drafted and that
        verified, drafts verified and kept, next drafts taken from an anchored branch."""
        totals = self.speculation or dict.fromkeys(SPECULATION, 0)
        for key, n in counts.items():
            totals[key] += n
        self.speculation = totals

    def commit_pass(self, n_rows: int) -> None:
        self.commit_passes += n_rows
        self.batched_forwards += 1

    def block_done(self, done: int, total: int) -> None:
        for o in self.observers:
            o.on_block(self, done, total)

    def snapshot(self) -> Trace:
        """The trace so far (every step recorded until now, the tokens committed until now): what a
        streamed view shows while the decode goes on."""
        if self.recorder:
            self.recorder.flush(self.clock.time_of)
        trace = build_trace(self, self.ctx)
        trace.steps = list(trace.steps)  # the recorder's list keeps growing: a snapshot must not
        return trace

    def trace_params(self) -> dict:
        return {**self.params.for_trace(self.decoder, self.backend), "n_regions": len(self.regions),
                "cuda_graphs": graphs_choice(self.backend.exec_mode, self.backend.device), **self.extra_params}

    def finish(self) -> Trace:
        trace = self.snapshot()
        for o in self.observers:
            o.on_finish(self, trace)
        return trace


def observers_for(progress: ProgressFn | None, snapshot: Snapshot | None) -> list[DecodeObserver]:
    """The observers behind the decoders' ``progress`` and ``snapshot`` arguments."""
    return ([Progress(progress)] if progress else []) + ([Streaming(snapshot)] if snapshot else [])


def sync(device: torch.device) -> None:
    """Wait for the device (CUDA): times taken after it are the work's, not its launch."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
