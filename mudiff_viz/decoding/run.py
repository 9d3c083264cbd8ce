"""What one decode accumulates, shared by every decoder: the clock, each region's state and the
step recorder.

A decoder loop only asks the backend for logits and the scheduler (or sampler) for decisions,
then tells the run what happened: ``record`` a step, ``tick`` the clock after a forward,
``end_block`` / ``append`` the committed tokens. ``finish`` hands everything to the trace builder.
Recorded tensors stay on the model's device and move to the host once per block (``flush``), so
recording adds no per-step synchronisation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from mudiff_viz.core.trace import StepRecord, Trace, rnd
from mudiff_viz.core.types import Region
from mudiff_viz.decoding.build import build_trace
from mudiff_viz.decoding.settings import DecodeParams


class Clock:
    """Wall-clock time of each forward on the shared clock, taken at the loop's own sync points."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.times: list[float] = []
        self.prefill_s = 0.0

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def mark_prefill(self) -> None:
        self.prefill_s = self.now()

    def tick(self) -> None:
        """The forward for the next clock index has finished (called right after a host sync)."""
        self.times.append(self.now())

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

    def cut_at_stop(self, stop_ids: frozenset[int]) -> "RegionState":
        """The tokens up to and including the first stop token (the rest is block filler)."""
        cut = next((k + 1 for k, t in enumerate(self.ids) if t in stop_ids), len(self.ids))
        return RegionState(self.ids[:cut], self.commit_forward[:cut], self.confidence[:cut], self.stopped)


@dataclass
class _Pending:
    rows: torch.Tensor  # (b,) region indices
    offset: int  # position of column 0 in the region's output (block start)
    masked: torch.Tensor  # (b, L) bool: masked before this step
    x0: torch.Tensor
    conf: torch.Tensor
    committed: torch.Tensor
    forced: torch.Tensor
    top_p: torch.Tensor  # (b, L, k)
    top_i: torch.Tensor
    forward: int
    block: int


class StepRecorder:
    """Step records, kept on the device per block and expanded on the host once per block. Rows
    with nothing masked at a step (a fused step runs every row of the block) leave no record."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.pending: list[_Pending] = []
        self.steps: list[StepRecord] = []

    def add(self, rows, offset: int, masked, out, forward: int, block: int) -> None:
        if not self.enabled:
            return
        self.pending.append(_Pending(rows, offset, masked, out.x0, out.confidence, out.committed, out.forced,
                                     out.top_p, out.top_i, forward, block))

    def flush(self, clock: Clock) -> None:
        """Move the pending records to the host in one transfer per field and expand them."""
        if not self.pending:
            return
        cat = lambda name: torch.cat([getattr(p, name) for p in self.pending]).cpu().numpy()  # noqa: E731
        rows, masked, x0, conf = cat("rows"), cat("masked"), cat("x0"), cat("conf")
        committed, forced, top_p, top_i = cat("committed"), cat("forced"), cat("top_p"), cat("top_i")
        meta = [(p.offset, p.forward, p.block) for p in self.pending for _ in range(p.rows.numel())]
        for i, (offset, forward, block) in enumerate(meta):
            cols = np.flatnonzero(masked[i])
            if cols.size == 0:
                continue
            self.steps.append(
                StepRecord(
                    forward=forward,
                    region=int(rows[i]),
                    block=block,
                    time_s=rnd(clock.time_of(forward)),
                    positions=(cols + offset).tolist(),
                    candidates=x0[i, cols].tolist(),
                    confidences=[rnd(c) for c in conf[i, cols].tolist()],
                    committed=committed[i, cols].astype(int).tolist(),
                    topk=[_alternatives(ti, tp) for ti, tp in zip(top_i[i, cols].tolist(), top_p[i, cols].tolist())],
                    forced=int(forced[i].sum()),
                )
            )
        self.pending.clear()


def _alternatives(ids: list[int], probs: list[float]) -> list[list[float]]:
    """Top-k as [[id, p], ...]: p to 3 decimals (display precision), alternatives under 0.05% dropped."""
    return [[int(t), round(p, 3)] for k, (t, p) in enumerate(zip(ids, probs)) if k == 0 or p >= 0.0005]


Snapshot = Callable[[Callable[[], Trace]], None]  # told after each block (and denoising step): call the argument for the trace so far


class DecodeRun:
    """The shared state of one decode of ``regions`` of ``page``."""

    def __init__(self, decoder: str, backend, page, regions: list[Region], params: DecodeParams) -> None:
        self.decoder = decoder
        self.backend = backend
        self.page = page
        self.regions = regions
        self.params = params
        self.clock = Clock()
        self.states = [RegionState() for _ in regions]
        self.recorder = StepRecorder(enabled=params.record)
        self.forward = 0  # the shared clock: one per batched forward
        self.seq_forwards = 0  # forwards per sequence (a batched forward of b rows counts b)
        self.commit_passes = 0
        self.batched_forwards = 0
        self.truncated: str | None = None
        self.extra_params: dict = {}  # what the loop adds to the trace's params (e.g. the prefill block)
        self.ctx = None  # the backend's context, once encoded
        self.generator = torch.Generator(device=backend.device).manual_seed(params.seed)
        self.stop_ids = torch.tensor(sorted(backend.stop_ids), device=backend.device, dtype=torch.long)

    def prefill_done(self) -> None:
        """The vision encoder and prompt prefill are over: the clock's prefill mark."""
        sync(self.backend.device)
        self.clock.mark_prefill()

    def alive(self) -> list[int]:
        return [i for i, s in enumerate(self.states) if not s.stopped]

    def out_of_time(self) -> bool:
        if self.params.max_seconds is not None and self.clock.now() > self.params.max_seconds:
            self.truncated = f"time limit of {self.params.max_seconds:.0f} s"
            return True
        return False

    def record(self, rows: torch.Tensor, offset: int, masked: torch.Tensor, out, block: int) -> None:
        """One denoising forward of ``rows``: what the scheduler (or sampler) decided."""
        self.recorder.add(rows, offset, masked, out, self.forward, block)
        self.seq_forwards += rows.numel()
        self.batched_forwards += 1

    def tick(self) -> None:
        """The current forward is over (right after a host sync): advance the shared clock."""
        self.clock.tick()
        self.forward += 1

    def account(self, seq_forwards: int, batched_forwards: int, times: list[float]) -> None:
        """Steps run without a per-step tick (a fused block): count them and put their times on the clock."""
        self.seq_forwards += seq_forwards
        self.batched_forwards += batched_forwards
        self.clock.times.extend(times)
        self.forward += len(times)

    def commit_pass(self, n_rows: int) -> None:
        self.commit_passes += n_rows
        self.batched_forwards += 1

    def flush(self) -> None:
        self.recorder.flush(self.clock)

    def snapshot(self) -> Trace:
        """The trace so far (every step recorded until now, the tokens committed until now): what a
        streamed view shows while the decode goes on."""
        self.flush()
        trace = build_trace(self, self.ctx)
        trace.steps = list(trace.steps)  # the recorder's list keeps growing: a snapshot must not
        return trace

    def trace_params(self) -> dict:
        return {**self.params.for_trace(self.decoder), "n_regions": len(self.regions), **self.extra_params}

    def finish(self, ctx) -> Trace:
        self.flush()
        return build_trace(self, ctx)


def sync(device: torch.device) -> None:
    """Wait for the device (CUDA): times taken after it are the work's, not its launch."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
