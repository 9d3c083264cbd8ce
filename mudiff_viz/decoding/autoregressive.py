"""Autoregressive decoding with a KV cache: one token per forward, every step recorded.

The first token's logits come from the prefill (so the prefill is that step's forward; its time is
reported as ``prefill_s``). Greedy by default; ``temperature > 0`` samples.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.diffusion import Progress, _sync
from mudiff_viz.decoding.policies import sample_tokens
from mudiff_viz.decoding.recorder import Clock, StepRecorder, build_trace


@dataclass
class ARParams:
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    max_new_tokens: int = 1024
    record: bool = True
    max_seconds: float | None = None

    def check(self) -> None:
        if not 0.0 <= self.temperature <= 10.0 or math.isnan(self.temperature):
            raise UserInputError(f"temperature must be in [0, 10], got {self.temperature}")
        if self.max_new_tokens < 1:
            raise UserInputError(f"max new tokens must be >= 1, got {self.max_new_tokens}")


@torch.inference_mode()
def decode_autoregressive(backend, page, regions, params: ARParams, progress: Progress | None = None) -> Trace:
    """Decode all ``regions`` of ``page`` token by token; returns the full Trace."""
    params.check()
    device = backend.device
    clock = Clock()
    ctx = backend.encode(page, regions)
    logits = backend.first_logits(ctx)
    _sync(device)
    clock.mark_prefill()
    gen = torch.Generator(device=device).manual_seed(params.seed)
    n_rows = len(regions)
    stop_ids = torch.tensor(sorted(backend.stop_ids), device=device, dtype=torch.long)
    recorder = StepRecorder(enabled=params.record)
    out_ids: list[list[int]] = [[] for _ in range(n_rows)]
    out_conf: list[list[float]] = [[] for _ in range(n_rows)]
    out_clock: list[list[int]] = [[] for _ in range(n_rows)]
    rows = torch.arange(n_rows, device=device)
    seq_forwards = batched = 0
    truncated = None
    flush_every = 32  # move records to the host in chunks, like the diffusion decoder per block
    for t in range(params.max_new_tokens):
        x, conf, probs = sample_tokens(logits.unsqueeze(1), params.temperature, params.top_k, params.top_p, gen)
        x, conf, probs = x[:, 0], conf[:, 0], probs[:, 0]
        ones = torch.ones(len(rows), 1, dtype=torch.bool, device=device)
        recorder.add(rows, t, ones, x[:, None], conf[:, None], ones, probs[:, None], t, 0)
        seq_forwards += len(rows)
        batched += 1
        host_x, host_c, host_rows = x.cpu().tolist(), conf.cpu().tolist(), rows.cpu().tolist()  # the sync AR needs
        clock.tick()
        for r, tok, c in zip(host_rows, host_x, host_c):
            out_ids[r].append(tok)
            out_conf[r].append(c)
            out_clock[r].append(t)
        if (t + 1) % flush_every == 0:
            recorder.flush(clock)
        keep = ~torch.isin(x, stop_ids)
        if params.max_seconds is not None and clock.now() > params.max_seconds:
            truncated = f"time limit of {params.max_seconds:.0f} s"
            break
        if not bool(keep.any()) or t + 1 == params.max_new_tokens:
            break
        rows, x = rows[keep], x[keep]
        logits = backend.next_logits(ctx, x, rows)
        if progress and (t + 1) % 16 == 0:
            progress(t + 1, params.max_new_tokens)
    recorder.flush(clock)
    trace_params = {"decoder": "ar", **asdict(params), "n_regions": n_rows, "exec_mode": getattr(backend, "exec_mode", "eager")}
    return build_trace(
        decoder="ar", backend=backend, page=page, regions=regions, params=trace_params,
        ids=out_ids, commit_clock=out_clock, confidence=out_conf, n_generated=[len(x) for x in out_ids],
        region_prefill=[clock.prefill_s] * n_rows, recorder=recorder, clock=clock,
        seq_forwards=seq_forwards, commit_passes=0, batched_forwards=batched, ctx=ctx, truncated=truncated,
    )
