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

import gc
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from mudiff_viz.core.trace import StepRecord, Trace, rnd, rnd_array

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


BATCH = 64  # forwards whose records are expanded together (a fixed numpy cost per expansion)


class StepRecorder(DecodeObserver):
    """The trace's step records: kept on the device during a block and expanded on the host once
    per block (no per-step synchronisation). Rows with nothing masked at a step leave no record."""

    def __init__(self) -> None:
        self.pending: list[StepEvent] = []
        self.spec_pending: list[SpecEvent] = []
        self.steps: list[StepRecord] = []
        self.seconds = 0.0  # spent making records (the trace's metrics.recording_s)
        self.seen: dict[int, None] = {}  # every token id the records show (the trace's vocabulary)

    def on_step(self, run: "DecodeRun", step: StepEvent | SpecEvent) -> None:
        if isinstance(step, SpecEvent):
            self.spec_pending.append(step)  # widths differ (drafts cut by the draft floor): padded at the flush
        else:
            if self.pending and self.pending[0].masked.shape[1] != step.masked.shape[1]:
                self.flush(run.clock.time_of)  # one batch of records per block length
            self.pending.append(step)

    def on_block(self, run: "DecodeRun", done: int, total: int) -> None:
        # one region at a time a block takes one or two forwards (a draft-and-verify cycle is one):
        # expanding the records every block cost more than the records (a fixed numpy overhead per
        # flush). They wait for a batch of forwards, a snapshot or the end (DecodeRun.snapshot
        # flushes), and so never miss a frame
        if len(self.pending) + len(self.spec_pending) < BATCH:
            return
        self.flush(run.clock.time_of)

    def flush(self, time_of: Callable[[int], float]) -> None:
        """Move the pending records to the host in one transfer per field and expand them."""
        t0 = time.perf_counter()
        with collector_paused():
            if self.spec_pending:
                self.steps += _spec_records(self.spec_pending, time_of, self.seen)
                self.spec_pending = []
            if self.pending:
                self.steps += _step_records(self.pending, time_of, self.seen)
                self.pending = []
        self.seconds += time.perf_counter() - t0


_pauses = 0
_pause_lock = threading.Lock()


@contextmanager
def collector_paused():
    """Python's cyclic garbage collector off while records are made: they are lists of numbers (no
    cycles), and the tens of thousands made in one flush set off collections that walked the whole
    heap, the models' objects and every record so far included: most of the cost of recording, and
    erratic (tens of ms a time). Nested and concurrent pauses count; the last one out turns the
    collector back on (if it was on)."""
    global _pauses
    with _pause_lock:
        if _pauses == 0:
            collector_paused.was_on = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and collector_paused.was_on:
                gc.enable()


collector_paused.was_on = True


def _cat(events: list, get: Callable) -> np.ndarray:
    return torch.cat([get(e) for e in events]).cpu().numpy()


def _step_records(events: list[StepEvent], time_of: Callable[[int], float], seen: dict[int, None]) -> list[StepRecord]:
    """Denoising (and AR) steps: each row's masked positions of its block."""
    masked = _cat(events, lambda p: p.masked)
    offsets = np.concatenate([np.full(p.rows.numel(), p.offset) for p in events])
    positions = np.arange(masked.shape[1])[None, :] + offsets[:, None]
    forced = _cat(events, lambda p: p.out.forced).sum(-1).tolist()
    meta = [dict(forward=p.forward, block=p.block) for p in events for _ in range(p.rows.numel())]
    for m, f in zip(meta, forced):
        m["forced"] = int(f)
    return _records(events, masked, positions, lambda p: (p.out.x0, p.out.confidence, p.out.committed, p.out.top_p,
                                                          p.out.top_i), meta, time_of, seen)


def _spec_records(events: list[SpecEvent], time_of: Callable[[int], float], seen: dict[int, None]) -> list[StepRecord]:
    """Draft-and-verify forwards: each row's entries, with their verdicts and the drafts verified.
    Events of one width are expanded together (padding every event to the widest cost more than
    the records: a pad per field per event); the records then go back into forward order."""
    by_width: dict[int, list[SpecEvent]] = {}
    for e in events:
        by_width.setdefault(e.width, []).append(e)
    out: list[StepRecord] = []
    for group in by_width.values():
        valid, positions = _cat(group, lambda e: e.valid), _cat(group, lambda e: e.positions)
        verdicts, drafts = _cat(group, lambda e: e.verdicts), _cat(group, lambda e: e.drafts)
        meta = [dict(forward=e.forward, block=e.block, role=e.role) for e in group for _ in range(e.rows.numel())]
        per_row = {"verdicts": verdicts, "drafts": drafts}
        out += _records(group, valid, positions, lambda e: (e.candidates, e.confidences, e.committed, e.top_p, e.top_i),
                        meta, time_of, seen, per_row)
    if len(by_width) > 1:
        out.sort(key=lambda s: s.forward)  # stable: rows keep their order within a forward
    return out


def _records(events: list, valid: np.ndarray, positions: np.ndarray, fields: Callable, meta: list[dict],
             time_of: Callable[[int], float], seen: dict[int, None],
             per_row: dict[str, np.ndarray] | None = None) -> list[StepRecord]:
    """StepRecords of a batch of events (one per row and event with any valid entry). The rounding
    and the top-k filter run once for the whole batch (numpy): the Python work per entry is a few
    list lookups, which keeps recording within a few percent of a decode's time. The ids the kept
    alternatives show are added to ``seen`` (the trace's vocabulary), found here in numpy rather
    than by walking every record's top-k again when a trace is built."""
    rows = _cat(events, lambda e: e.rows).tolist()
    cand, conf, committed, top_p, top_i = (_cat(events, lambda e, k=k: fields(e)[k]) for k in range(5))
    # alternatives under 0.05% are dropped, the best one stays: top-k is sorted, so what is kept is
    # a prefix of each entry's list, of this length
    n_kept = np.maximum((top_p >= 0.0005).sum(-1), 1)
    shown = valid[:, :, None] & (np.arange(top_i.shape[-1]) < n_kept[:, :, None])
    ids = top_i[shown]
    _, first = np.unique(ids, return_index=True)
    seen.update(dict.fromkeys(ids[np.sort(first)].tolist()))
    top_p = np.round(top_p.astype(np.float64), 3)  # display precision
    conf = rnd_array(conf)
    times: dict[int, float] = {}
    for m in meta:
        if m["forward"] not in times:
            times[m["forward"]] = rnd(time_of(m["forward"]))
    if valid.all():  # AR, and most draft-and-verify batches: every row whole, so lists made at once
        return _whole_records(rows, positions, cand, conf, committed, top_p, top_i, n_kept, meta, times, per_row)
    steps = []
    for i, m in enumerate(meta):
        cols = np.flatnonzero(valid[i])
        if cols.size == 0:
            continue
        extra = {k: v[i, cols].tolist() for k, v in (per_row or {}).items()}
        topk = [list(map(list, zip(ti[:n], tp[:n])))
                for ti, tp, n in zip(top_i[i, cols].tolist(), top_p[i, cols].tolist(), n_kept[i, cols].tolist())]
        steps.append(StepRecord(
            region=int(rows[i]), time_s=times[m["forward"]], positions=positions[i, cols].tolist(),
            candidates=cand[i, cols].tolist(), confidences=conf[i, cols].tolist(),
            committed=committed[i, cols].astype(int).tolist(), topk=topk, **m, **extra,
        ))
    return steps


def _whole_records(rows, positions, cand, conf, committed, top_p, top_i, n_kept, meta, times,
                   per_row) -> list[StepRecord]:
    """:func:`_records` where every entry is valid: each field becomes Python lists in one call and
    each record takes its row (no per-record numpy indexing: AR makes a record per row and token)."""
    cols = {"positions": positions.tolist(), "candidates": cand.tolist(), "confidences": conf.tolist(),
            "committed": committed.astype(int).tolist(), **{k: v.tolist() for k, v in (per_row or {}).items()}}
    top_i, top_p, n_kept = top_i.tolist(), top_p.tolist(), n_kept.tolist()
    names = list(cols)
    steps = []
    for i, m in enumerate(meta):
        topk = [[[a, b] for a, b in zip(ids[:n], ps[:n])] for ids, ps, n in zip(top_i[i], top_p[i], n_kept[i])]
        steps.append(StepRecord(region=int(rows[i]), time_s=times[m["forward"]], topk=topk,
                                **{k: cols[k][i] for k in names}, **m))
    return steps


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
