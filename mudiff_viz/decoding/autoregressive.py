"""Autoregressive decoding with a KV cache: one token per forward, every step recorded.

The first token's logits come from the prefill (so the prefill is that step's forward; its time is
reported as ``prefill_s``). Greedy by default; ``temperature > 0`` samples.
"""

from __future__ import annotations

import torch

from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.diffusion import Progress
from mudiff_viz.decoding.run import DecodeRun, Snapshot
from mudiff_viz.decoding.sampling import sample_tokens
from mudiff_viz.decoding.scheduler import step_output
from mudiff_viz.decoding.settings import DecodeParams

FLUSH_EVERY = 32  # move records to the host in chunks, like the diffusion decoder per block


@torch.inference_mode()
def decode_autoregressive(backend, page, regions, params: DecodeParams, progress: Progress | None = None,
                          snapshot: Snapshot | None = None) -> Trace:
    """Decode all ``regions`` of ``page`` token by token; returns the full Trace (``progress`` and
    ``snapshot`` as for decode_diffusion, every FLUSH_EVERY tokens)."""
    params.check()
    run = DecodeRun("ar", backend, page, regions, params)
    ctx = run.ctx = backend.encode(page, regions)
    logits = backend.first_logits(ctx)
    run.prefill_done()
    rows = torch.arange(len(regions), device=backend.device)
    for t in range(params.max_new_tokens):
        x, conf, probs = sample_tokens(logits[:, None], params.temperature, params.top_k, params.top_p, run.generator)
        one = torch.ones_like(x, dtype=torch.bool)
        run.record(rows, t, one, step_output(x, conf, probs, one, torch.zeros_like(one)), 0)
        host_x, host_c, host_rows = x[:, 0].tolist(), conf[:, 0].tolist(), rows.tolist()  # the sync AR needs
        for r, tok, c in zip(host_rows, host_x, host_c):
            run.states[r].extend([tok], [run.forward], [c])
        run.tick()
        if (t + 1) % FLUSH_EVERY == 0:
            run.flush()
            if snapshot:
                snapshot(run.snapshot)
        keep = ~torch.isin(x[:, 0], run.stop_ids)
        for r, k in zip(host_rows, keep.tolist()):
            run.states[r].stopped = not k
        if run.out_of_time() or not bool(keep.any()) or t + 1 == params.max_new_tokens:
            break
        rows, x = rows[keep], x[keep, 0]
        logits = backend.next_logits(ctx, x, rows)
        if progress and (t + 1) % 16 == 0:
            progress(t + 1, params.max_new_tokens)
    return run.finish(ctx)
