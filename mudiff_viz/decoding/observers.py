"""Who watches a decode: one interface for everything that is not the decode itself.

A decoder loop tells its :class:`~mudiff_viz.decoding.run.DecodeRun` what happened; the run passes it
on to its observers, in order:

- ``on_prefill(run)``: the vision encoder and prompt prefill are over;
- ``on_step(run, step)``: one forward's decisions (a denoising step, or one AR token), still on the device;
- ``on_block(run, done, total)``: a unit of work ended (a diffusion block; a chunk of AR tokens): a
  good moment to move records to the host or show the decode so far;
- ``on_finish(run, trace)``: the trace is built.

The trace recorder, the app's streaming, progress reports are observers; ``--no-record`` is a
decode without the recorder (as diffusers' callbacks or transformers' streamers, but one interface).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from mudiff_viz.core.trace import StepRecord, Trace, rnd

# Observers are told the run they watch (decoding/run.py: DecodeRun); it imports this module, so the
# name stays a string here.


@dataclass
class StepEvent:
    """One forward of ``rows`` (region indices) at clock index ``forward``: what was masked before it
    and what the policy decided (a StepOutput). Rows with nothing masked committed nothing."""

    rows: torch.Tensor  # (b,)
    offset: int  # position of column 0 in each region's output (the block's start)
    masked: torch.Tensor  # (b, L) bool
    out: object  # StepOutput: x0, confidence, committed, forced, top_p, top_i
    forward: int
    block: int


@dataclass
class SpecEvent:
    """One draft-and-verify forward of ``rows`` at clock index ``forward``: per row, entries at explicit
    positions (a position may hold a verify entry and a draft entry), each with its verdict
    (core/trace.py: DRAFTED, ACCEPTED, ...), the draft it verified (-1: none) and the top-k of the
    model that produced it. ``valid`` marks the entries that exist. ``role``: "verifier" when the
    decode's verifier model ran the forward."""

    rows: torch.Tensor  # (b,)
    positions: torch.Tensor  # (b, C) absolute positions in each region's output
    valid: torch.Tensor  # (b, C) bool
    candidates: torch.Tensor  # (b, C) the token at each entry (committed, drafted, or the verifier's own pick)
    confidences: torch.Tensor  # (b, C) its probability under the model that produced the entry
    committed: torch.Tensor  # (b, C) bool
    verdicts: torch.Tensor  # (b, C)
    drafts: torch.Tensor  # (b, C)
    top_p: torch.Tensor  # (b, C, k)
    top_i: torch.Tensor  # (b, C, k)
    forward: int
    block: int
    role: str | None = None

    @property
    def width(self) -> int:
        return self.positions.shape[1]


class DecodeObserver:
    """Does nothing; subclasses override what they watch."""

    def on_prefill(self, run: "DecodeRun") -> None:
        pass

    def on_step(self, run: "DecodeRun", step: StepEvent) -> None:
        pass

    def on_block(self, run: "DecodeRun", done: int, total: int) -> None:
        pass

    def on_finish(self, run: "DecodeRun", trace: Trace) -> None:
        pass


class StepRecorder(DecodeObserver):
    """The trace's step records: kept on the device during a block and expanded on the host once
    per block (no per-step synchronisation). Rows with nothing masked at a step leave no record."""

    def __init__(self) -> None:
        self.pending: list[StepEvent] = []
        self.spec_pending: list[SpecEvent] = []
        self.steps: list[StepRecord] = []

    def on_step(self, run: "DecodeRun", step: StepEvent | SpecEvent) -> None:
        if isinstance(step, SpecEvent):
            if self.spec_pending and self.spec_pending[0].width != step.width:
                self.flush(run.clock.time_of)  # one batch of records per width
            self.spec_pending.append(step)
        else:
            self.pending.append(step)

    def on_block(self, run: "DecodeRun", done: int, total: int) -> None:
        self.flush(run.clock.time_of)

    def flush(self, time_of: Callable[[int], float]) -> None:
        """Move the pending records to the host in one transfer per field and expand them."""
        self._flush_spec(time_of)
        if not self.pending:
            return
        cat = lambda get: torch.cat([get(p) for p in self.pending]).cpu().numpy()  # noqa: E731
        rows, masked = cat(lambda p: p.rows), cat(lambda p: p.masked)
        x0, conf = cat(lambda p: p.out.x0), cat(lambda p: p.out.confidence)
        committed, forced = cat(lambda p: p.out.committed), cat(lambda p: p.out.forced)
        top_p, top_i = cat(lambda p: p.out.top_p), cat(lambda p: p.out.top_i)
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
                    time_s=rnd(time_of(forward)),
                    positions=(cols + offset).tolist(),
                    candidates=x0[i, cols].tolist(),
                    confidences=[rnd(c) for c in conf[i, cols].tolist()],
                    committed=committed[i, cols].astype(int).tolist(),
                    topk=[_alternatives(ti, tp) for ti, tp in zip(top_i[i, cols].tolist(), top_p[i, cols].tolist())],
                    forced=int(forced[i].sum()),
                )
            )
        self.pending.clear()


    def _flush_spec(self, time_of: Callable[[int], float]) -> None:
        if not self.spec_pending:
            return
        events = self.spec_pending
        cat = lambda get: torch.cat([get(e) for e in events]).cpu().numpy()  # noqa: E731
        rows, valid, pos = cat(lambda e: e.rows), cat(lambda e: e.valid), cat(lambda e: e.positions)
        cand, conf, committed = cat(lambda e: e.candidates), cat(lambda e: e.confidences), cat(lambda e: e.committed)
        verdicts, drafts = cat(lambda e: e.verdicts), cat(lambda e: e.drafts)
        top_p, top_i = cat(lambda e: e.top_p), cat(lambda e: e.top_i)
        meta = [(e.forward, e.block, e.role) for e in events for _ in range(e.rows.numel())]
        for i, (forward, block, role) in enumerate(meta):
            cols = np.flatnonzero(valid[i])
            if cols.size == 0:
                continue
            self.steps.append(StepRecord(
                forward=forward, region=int(rows[i]), block=block, time_s=rnd(time_of(forward)),
                positions=pos[i, cols].tolist(), candidates=cand[i, cols].tolist(),
                confidences=[rnd(c) for c in conf[i, cols].tolist()], committed=committed[i, cols].astype(int).tolist(),
                topk=[_alternatives(ti, tp) for ti, tp in zip(top_i[i, cols].tolist(), top_p[i, cols].tolist())],
                verdicts=verdicts[i, cols].tolist(), drafts=drafts[i, cols].tolist(), role=role,
            ))
        self.spec_pending = []


def _alternatives(ids: list[int], probs: list[float]) -> list[list[float]]:
    """Top-k as [[id, p], ...]: p to 3 decimals (display precision), alternatives under 0.05% dropped."""
    return [[int(t), round(p, 3)] for k, (t, p) in enumerate(zip(ids, probs)) if k == 0 or p >= 0.0005]


ProgressFn = Callable[[int, int], None]  # told (units of work done, an upper bound of the total)


class Progress(DecodeObserver):
    """``report(done, total)`` after every unit of work (the CLI's and the app's progress). The
    total is an upper bound (every region may run to its token limit); a decode that stops early
    reports ``(done, done)`` at its end, so a progress bar ends full."""

    def __init__(self, report: ProgressFn) -> None:
        self.report = report
        self.last: tuple[int, int] | None = None

    def on_block(self, run: "DecodeRun", done: int, total: int) -> None:
        self.last = (done, total)
        self.report(done, total)

    def on_finish(self, run: "DecodeRun", trace: Trace) -> None:
        if self.last is not None and self.last[0] < self.last[1]:
            self.report(self.last[0], self.last[0])


Snapshot = Callable[[Callable[[], Trace]], None]  # handed, after each block (and denoising step), a builder of the trace so far


class Streaming(DecodeObserver):
    """Hands ``snapshot`` a builder of the trace so far after every unit of work and, when the loop
    syncs with the host after every step anyway (the eager loop, AR), after every denoising step:
    the app's first frame then comes after the first step, not after a whole block (up to 32
    forwards). A block in progress is only in its step records until it closes."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def on_step(self, run: "DecodeRun", step: StepEvent) -> None:
        if run.frames_per_step:
            self.snapshot(run.snapshot)

    def on_block(self, run: "DecodeRun", done: int, total: int) -> None:
        self.snapshot(run.snapshot)
