"""Block diffusion decoding with every denoising step recorded (the release's loop, batched over
regions; docs/real-models.md#the-decoding-loop).

Per block: forward the block against the cache (nothing stored) -> the scheduler samples guesses
and picks commits -> repeat until no mask is left -> one more forward stores the block in the KV
cache -> stop the rows whose block holds a stop token.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.run import DecodeRun
from mudiff_viz.decoding.scheduler import BlockScheduler
from mudiff_viz.decoding.settings import DecodeParams

Progress = Callable[[int, int], None]


@torch.inference_mode()
def decode_diffusion(backend, page, regions, params: DecodeParams, progress: Progress | None = None) -> Trace:
    """Decode all ``regions`` of ``page`` with block diffusion; returns the full Trace."""
    params.check()
    run = DecodeRun("diffusion", backend, page, regions, params)
    ctx = backend.encode(page, regions, block_length=params.block_length)
    run.prefill_done()
    run.extra_params["prefill_block"] = params.block_length if backend.prefill_follows_block_length else None
    scheduler = BlockScheduler(params, backend.mask_id, run.generator)
    L, device = params.block_length, backend.device
    n_blocks = max(1, math.ceil(params.max_new_tokens / L))
    for b in range(n_blocks):
        alive = run.alive()
        if not alive or run.out_of_time():
            break
        rows = torch.tensor(alive, device=device)
        block = torch.full((len(alive), L), backend.mask_id, dtype=torch.long, device=device)
        forward_of = torch.full_like(block, -1)
        conf_of = torch.zeros(block.shape, dtype=torch.float32, device=device)
        for i in range(params.steps + 1 + L):  # the step limit force-commits, so this always ends
            masked = block == backend.mask_id
            active = masked.any(-1).nonzero().squeeze(-1)  # the host sync the algorithm needs anyway
            if i > 0:
                run.tick()
            if active.numel() == 0:
                break
            out = scheduler.step(backend.block_logits(ctx, block[active], rows[active]), masked[active], i)
            block[active] = torch.where(out.committed, out.x0, block[active])
            forward_of[active] = torch.where(out.committed, run.forward, forward_of[active])
            conf_of[active] = torch.where(out.committed, out.confidence, conf_of[active])
            run.record(rows[active], b * L, masked[active], out, b)
        backend.commit_block(ctx, block, rows)
        run.commit_pass(len(alive))
        run.flush()
        ids, forwards, confs = block.tolist(), forward_of.tolist(), conf_of.tolist()
        stopped = torch.isin(block, run.stop_ids).any(-1).tolist()
        for j, r in enumerate(alive):
            run.states[r].extend(ids[j], forwards[j], confs[j])
            run.states[r].stopped = stopped[j]
        if progress:
            progress(b + 1, n_blocks)
    return run.finish(ctx)
