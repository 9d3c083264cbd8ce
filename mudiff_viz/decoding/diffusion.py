"""Block diffusion decoding with every denoising step recorded (the release's loop, batched over
regions; docs/real-models.md#the-decoding-loop). The one block loop of the project.

Per block: forward the block against the cache (nothing stored) -> the policy samples guesses and
picks commits -> repeat until no mask is left -> one more forward stores the block in the KV cache
-> the stopping criteria end the rows whose block holds a stop token. ``params.fused`` only changes
how the loop syncs with the device (:class:`EagerSync`, :class:`FusedSync`), never what it computes.
"""

from __future__ import annotations

import math

import torch

from models.base import BlockDenoiser, StepCapturer
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.observers import ProgressFn, Snapshot, StepEvent
from mudiff_viz.decoding.run import DecodeRun, observers_for
from mudiff_viz.decoding.sampling import probs_dtype
from mudiff_viz.decoding.scheduler import BlockScheduler, StepOutput
from mudiff_viz.decoding.settings import DecodeParams

@torch.inference_mode()
def decode_diffusion(backend: BlockDenoiser, page, regions, params: DecodeParams, progress: ProgressFn | None = None,
                     snapshot: Snapshot | None = None) -> Trace:
    """Decode all ``regions`` of ``page`` with block diffusion; returns the full Trace.

    ``progress(done, total)`` hears of every finished block; ``snapshot`` is handed, after every
    block and (eager loop) every denoising step, a function that builds the trace so far (for views
    that play a decode while it runs; a block in progress is only in its step records)."""
    params.check()
    run = DecodeRun("diffusion", backend, page, regions, params, observers_for(progress, snapshot))
    ctx = run.ctx = run.encode(backend, block_length=params.block_length)
    run.prefill_done()
    run.extra_params["prefill_block"] = params.block_length if backend.prefill_follows_block_length else None
    run.extra_params["loop"] = "fused" if params.fused else "eager"
    run.frames_per_step = not params.fused
    policy = BlockScheduler(run.params, backend.mask_id, run.generator, probs_dtype(run.params, backend))
    n_blocks = max(1, math.ceil(params.max_new_tokens / params.block_length))
    # whole blocks: a region may hold up to this many tokens (max_new_tokens rounded up to blocks)
    run.extra_params["tokens_per_region_max"] = n_blocks * params.block_length
    for b in range(n_blocks):
        alive = run.alive()
        if not alive or run.halt():
            break
        rows = torch.tensor(alive, device=backend.device)
        block, forward_of, conf_of = denoise_block(run, policy, rows, b)
        backend.commit_block(ctx, block, rows)
        run.commit_pass(len(alive))
        ids, forwards, confs = block.tolist(), forward_of.tolist(), conf_of.tolist()
        stopped = run.stopping.finished_rows(block).tolist()
        for j, r in enumerate(alive):
            run.states[r].extend(ids[j], forwards[j], confs[j])
            run.states[r].stopped = stopped[j]
        run.block_done(b + 1, n_blocks)
    return run.finish()


def denoise_block(run: DecodeRun, policy: BlockScheduler, rows: torch.Tensor, b: int):
    """Denoise one block of ``rows``; returns (block ids, forward of each commit, its confidence).

    Step ``i`` of the block is clock index ``run.forward + i``; the steps that had masks left are a
    prefix, and the clock advances by their number at the block's end (the step-limit step that
    force-commits included). How the loop learns which rows still have masks is the sync's business."""
    backend, L = run.backend, run.params.block_length
    block = torch.full((len(rows), L), backend.mask_id, dtype=torch.long, device=backend.device)
    forward_of = torch.full_like(block, -1)
    conf_of = torch.zeros(block.shape, dtype=torch.float32, device=backend.device)
    sync = (FusedSync if run.params.fused else EagerSync)(run, policy, len(rows))
    base, rows_with_masks = run.forward, []
    for i in range(policy.limit + 1):  # the step limit force-commits, so this always ends
        masked = block == backend.mask_id
        sel = sync.rows(masked)
        if sel is False:
            break
        if sel is None:
            out = denoise_step(backend, run.ctx, block, rows, masked, policy, i)
        else:
            out = spread(denoise_step(backend, run.ctx, block[sel], rows[sel], masked[sel], policy, i), sel, len(rows))
        block = torch.where(out.committed, out.x0, block)
        forward_of = torch.where(out.committed, base + i, forward_of)
        conf_of = torch.where(out.committed, out.confidence, conf_of)
        run.step(StepEvent(rows, b * L, masked, out, base + i, b))
        rows_with_masks.append(masked.any(-1).sum())
        sync.timer.mark()
        if sync.settled(block == backend.mask_id):
            break
    counts = torch.stack(rows_with_masks).tolist() if rows_with_masks else []  # one transfer per block
    steps = sum(1 for c in counts if c)
    run.advance(seq_forwards=sum(counts), batched_forwards=steps, times=sync.timer.times()[:steps])
    return block, forward_of, conf_of


def denoise_step(backend, ctx, block, rows, masked, policy: BlockScheduler, i: int) -> StepOutput:
    """The block's logits and the policy's decision: one captured graph where the backend can, else two calls."""
    if isinstance(backend, StepCapturer):
        return backend.captured_step(ctx, block, rows, policy, i)
    return policy(backend.block_logits(ctx, block, rows), masked, i)


def spread(part: StepOutput, sel: torch.Tensor, n: int) -> StepOutput:
    """A step computed for the selected rows, spread back over all ``n`` rows (the others commit nothing)."""

    def full(t: torch.Tensor) -> torch.Tensor:
        out = t.new_zeros((n, *t.shape[1:]))
        out[sel] = t
        return out

    return StepOutput(*(full(t) for t in (part.x0, part.confidence, part.committed, part.forced, part.top_p, part.top_i)))


class EagerSync:
    """The host reads after every step which rows still have masks and forwards only those (the sync
    the release's loop has too); no rows left ends the block."""

    def __init__(self, run: DecodeRun, policy: BlockScheduler, n_rows: int) -> None:
        self.timer = StepTimer(run.clock, torch.device("cpu"))

    def rows(self, masked: torch.Tensor):
        active = masked.any(-1).nonzero().squeeze(-1)
        return False if active.numel() == 0 else active

    def settled(self, still_masked: torch.Tensor) -> bool:
        return False  # the next step's host read finds out


class FusedSync:
    """No host round trip per step: every row takes every step (a row without masks commits nothing
    and leaves no record), so the forward and the policy's step can run as one captured graph; whether
    masks are left is read from a copy one step behind (CUDA) or directly (CPU). On CUDA at most one
    extra step per block runs after the last mask went (it commits and records nothing). Sampling
    draws random numbers per row given, so with several rows a sampling step forwards only the rows
    with masks, as the eager loop does (a one-row decode needs no subset)."""

    def __init__(self, run: DecodeRun, policy: BlockScheduler, n_rows: int) -> None:
        device = run.backend.device
        self.timer, self.flag = StepTimer(run.clock, device), LaggedFlag(device)
        self.subset = n_rows > 1 and not policy.capturable

    def rows(self, masked: torch.Tensor):
        return masked.any(-1) if self.subset else None

    def settled(self, still_masked: torch.Tensor) -> bool:
        return self.flag.settled(still_masked.any())


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
