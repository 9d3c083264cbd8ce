"""Block diffusion decoding with every denoising step recorded (the release's loop, batched over
regions; docs/real-models.md#the-decoding-loop).

Per block: forward the block against the cache (nothing stored) -> the scheduler samples guesses
and picks commits -> repeat until no mask is left -> one more forward stores the block in the KV
cache -> stop the rows whose block holds a stop token. Two ways to run a block, with the same
result: ``eager_block`` (the host checks after every step) and ``fused_block`` (no host round trip
per step; ``params.fused``).
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.run import DecodeRun, Snapshot
from mudiff_viz.decoding.scheduler import BlockScheduler, StepOutput
from mudiff_viz.decoding.settings import DecodeParams

Progress = Callable[[int, int], None]


@torch.inference_mode()
def decode_diffusion(backend, page, regions, params: DecodeParams, progress: Progress | None = None,
                     snapshot: Snapshot | None = None) -> Trace:
    """Decode all ``regions`` of ``page`` with block diffusion; returns the full Trace.

    ``progress(done, total)`` hears of every finished block; ``snapshot`` is handed, after every
    block and (eager loop) every denoising step, a function that builds the trace so far (for views
    that play a decode while it runs; a block in progress is only in its step records)."""
    params.check()
    run = DecodeRun("diffusion", backend, page, regions, params)
    ctx = run.ctx = backend.encode(page, regions, block_length=params.block_length)
    run.prefill_done()
    run.extra_params["prefill_block"] = params.block_length if backend.prefill_follows_block_length else None
    run.extra_params["loop"] = "fused" if params.fused else "eager"
    scheduler = BlockScheduler(params, backend.mask_id, run.generator)
    denoise = fused_block if params.fused else eager_block
    L, device = params.block_length, backend.device
    n_blocks = max(1, math.ceil(params.max_new_tokens / L))
    # a streamed view also hears after every denoising step (eager loop), so its first frame comes
    # after the first step, not after a whole block (up to 32 forwards)
    run.on_step = (lambda: snapshot(run.snapshot)) if snapshot else None
    for b in range(n_blocks):
        alive = run.alive()
        if not alive or run.out_of_time():
            break
        rows = torch.tensor(alive, device=device)
        block, forward_of, conf_of = denoise(run, ctx, scheduler, rows, b)
        backend.commit_block(ctx, block, rows)
        run.commit_pass(len(alive))
        run.flush()
        ids, forwards, confs = block.tolist(), forward_of.tolist(), conf_of.tolist()
        stopped = torch.isin(block, run.stop_ids).any(-1).tolist()  # the stop check: once per block
        for j, r in enumerate(alive):
            run.states[r].extend(ids[j], forwards[j], confs[j])
            run.states[r].stopped = stopped[j]
        if progress:
            progress(b + 1, n_blocks)
        if snapshot:
            snapshot(run.snapshot)
    return run.finish(ctx)


def eager_block(run: DecodeRun, ctx, scheduler: BlockScheduler, rows: torch.Tensor, b: int):
    """Denoise one block step by step, forwarding only the rows that still have masks; the host
    checks after every step which rows those are (the sync the release's loop has too)."""
    backend, L = run.backend, run.params.block_length
    block = torch.full((len(rows), L), backend.mask_id, dtype=torch.long, device=backend.device)
    forward_of = torch.full_like(block, -1)
    conf_of = torch.zeros(block.shape, dtype=torch.float32, device=backend.device)
    for i in range(run.params.steps + 1):  # the step limit force-commits, so this always ends
        masked = block == backend.mask_id
        active = masked.any(-1).nonzero().squeeze(-1)
        if i > 0:
            run.tick()
            if active.numel() and getattr(run, "on_step", None):
                run.on_step()  # the block so far: its committed positions show as pending tokens
        if active.numel() == 0:
            break
        out = backend.denoise_step(ctx, block[active], rows[active], masked[active], scheduler, i)
        block[active] = torch.where(out.committed, out.x0, block[active])
        forward_of[active] = torch.where(out.committed, run.forward, forward_of[active])
        conf_of[active] = torch.where(out.committed, out.confidence, conf_of[active])
        run.record(rows[active], b * L, masked[active], out, b)
    return block, forward_of, conf_of


def fused_block(run: DecodeRun, ctx, scheduler: BlockScheduler, rows: torch.Tensor, b: int):
    """Denoise one block with no host round trip per step: every row of the block takes every step
    (a row without masks commits nothing and leaves no record), all bookkeeping stays on the device,
    and whether masks are left is read from a copy one step behind (CUDA) or directly (CPU). The
    forward and the scheduler's step can then run as one captured graph (``backend.denoise_step``).
    Steps, tokens and traces equal :func:`eager_block`'s; on CUDA at most one extra step per block
    runs after the last mask went (it commits and records nothing)."""
    backend, L, device = run.backend, run.params.block_length, run.backend.device
    block = torch.full((len(rows), L), backend.mask_id, dtype=torch.long, device=device)
    forward_of = torch.full_like(block, -1)
    conf_of = torch.zeros(block.shape, dtype=torch.float32, device=device)
    timer, flags = StepTimer(run.clock, device), LaggedFlag(device)
    active_rows = []
    base = run.forward
    # Sampling draws random numbers for the rows it is given; eager gives only the rows with masks,
    # so for batched regions fused does the same (the real model decodes one row: no subset needed)
    subset = len(rows) > 1 and (run.params.temperature > 0 or run.params.strategy == "random")
    for i in range(run.params.steps + 1):
        masked = block == backend.mask_id
        if subset:
            out = _rows_with_masks(backend, ctx, block, rows, masked, scheduler, i)
        else:
            out = backend.denoise_step(ctx, block, rows, masked, scheduler, i)
        block = torch.where(out.committed, out.x0, block)
        forward_of = torch.where(out.committed, base + i, forward_of)
        conf_of = torch.where(out.committed, out.confidence, conf_of)
        run.recorder.add(rows, b * L, masked, out, base + i, b)
        active_rows.append(masked.any(-1).sum())
        timer.mark()
        if flags.settled((block == backend.mask_id).any()):
            break
    counts = torch.stack(active_rows).tolist()  # one transfer per block
    steps = sum(1 for c in counts if c)  # the steps that had masks: a prefix
    run.account(seq_forwards=sum(counts), batched_forwards=steps, times=timer.times()[:steps])
    return block, forward_of, conf_of


def _rows_with_masks(backend, ctx, block, rows, masked, scheduler, i) -> StepOutput:
    """A step for the rows that still have masks, spread back over all rows (the others commit nothing)."""
    sub = masked.any(-1)
    part = backend.denoise_step(ctx, block[sub], rows[sub], masked[sub], scheduler, i)

    def full(t: torch.Tensor) -> torch.Tensor:
        out = t.new_zeros((len(rows), *t.shape[1:]))
        out[sub] = t
        return out

    return StepOutput(full(part.x0), full(part.confidence), full(part.committed), full(part.forced), full(part.top_p),
                      full(part.top_i))


class StepTimer:
    """When each step finished, without waiting for the device: CUDA events read at block end;
    on the CPU the work is done when the call returns."""

    def __init__(self, clock, device: torch.device) -> None:
        self.clock, self.cuda = clock, device.type == "cuda"
        self.start = clock.now()
        self.marks: list = []
        if self.cuda:
            self.origin = torch.cuda.Event(enable_timing=True)
            self.origin.record()

    def mark(self) -> None:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.marks.append(ev)
        else:
            self.marks.append(self.clock.now())

    def times(self) -> list[float]:
        if not self.cuda:
            return list(self.marks)
        return [self.start + self.origin.elapsed_time(ev) / 1000.0 for ev in self.marks]


class LaggedFlag:
    """"Is any mask left?" without a per-step sync: on CUDA the flag is copied to pinned host memory
    asynchronously and the previous step's copy is read (it finished while this step was queued)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.prev: tuple | None = None

    def settled(self, any_left: torch.Tensor) -> bool:
        """True when a step's result says no mask is left (on CUDA: the previous step's)."""
        if not self.cuda:
            return not bool(any_left)
        host = torch.empty((), dtype=torch.bool, pin_memory=True)
        host.copy_(any_left, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        prev, self.prev = self.prev, (host, event)
        if prev is None:
            return False
        prev[1].synchronize()
        return not bool(prev[0])
