"""Block diffusion decoding with every denoising step recorded.

Reproduces the official ``low_confidence_dynamic`` loop of MinerU-Diffusion / SDAR
(docs/real-models.md#the-decoding-loop), batched over regions, with its pitfalls fixed:

- the per-step quota is clamped to the masked positions left (no re-commit of decoded positions);
- ``temperature == 0`` is a real deterministic mode (argmax, confidences from the T = 1 softmax);
- if the model samples the MASK token, that position stays masked (as in the official loop) and at
  the step limit the remaining masks are force-committed with the best non-MASK token.

Per block: forward (cache + block, nothing stored) -> sample x0 and confidences -> commit by the
strategy -> repeat until no mask is left -> one more forward stores the block in the KV cache ->
stop if a stop token was generated.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable

import torch

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.policies import STRATEGIES, quota_schedule, sample_tokens, select_commits
from mudiff_viz.decoding.recorder import Clock, StepRecorder, build_trace


@dataclass
class DiffusionParams:
    block_length: int = 32
    steps: int = 32
    threshold: float = 0.95
    temperature: float = 0.0  # 0 = deterministic; the release samples at 1.0
    top_k: int = 0
    top_p: float = 1.0
    strategy: str = "low_confidence_dynamic"
    seed: int = 0
    max_new_tokens: int = 1024
    record: bool = True
    max_seconds: float | None = None

    def check(self) -> None:
        if not 1 <= self.block_length <= 1024:
            raise UserInputError(f"block length must be in 1..1024, got {self.block_length}")
        if not 1 <= self.steps <= 4096:
            raise UserInputError(f"steps must be in 1..4096, got {self.steps}")
        if not 0.0 <= self.threshold <= 1.0:
            raise UserInputError(f"threshold must be in [0, 1], got {self.threshold}")
        if not 0.0 <= self.temperature <= 10.0 or math.isnan(self.temperature):
            raise UserInputError(f"temperature must be in [0, 10], got {self.temperature}")
        if self.strategy not in STRATEGIES:
            raise UserInputError(f"unknown strategy {self.strategy!r}; choose one of {', '.join(STRATEGIES)}")
        if self.max_new_tokens < 1:
            raise UserInputError(f"max new tokens must be >= 1, got {self.max_new_tokens}")
        if not 0.0 < self.top_p <= 1.0 or self.top_k < 0:
            raise UserInputError("top-p must be in (0, 1] and top-k >= 0")


Progress = Callable[[int, int], None]


@torch.inference_mode()
def decode_diffusion(backend, page, regions, params: DiffusionParams, progress: Progress | None = None) -> Trace:
    """Decode all ``regions`` of ``page`` with block diffusion; returns the full Trace."""
    params.check()
    device = backend.device
    clock = Clock()
    ctx = backend.encode(page, regions, block_length=params.block_length)
    _sync(device)
    clock.mark_prefill()
    gen = torch.Generator(device=device).manual_seed(params.seed)
    n_rows, L, mask_id = len(regions), params.block_length, backend.mask_id
    n_blocks = max(1, math.ceil(params.max_new_tokens / L))
    schedule = quota_schedule(L, params.steps)
    stop_ids = torch.tensor(sorted(backend.stop_ids), device=device, dtype=torch.long)
    recorder = StepRecorder(enabled=params.record)
    out_ids: list[list[int]] = [[] for _ in range(n_rows)]
    out_clock: list[list[int]] = [[] for _ in range(n_rows)]
    out_conf: list[list[float]] = [[] for _ in range(n_rows)]
    stopped = [False] * n_rows
    tick = 0  # the shared clock: one tick per batched denoising forward
    seq_forwards = commit_passes = batched = 0
    truncated = None
    for b in range(n_blocks):
        alive = [i for i in range(n_rows) if not stopped[i]]
        if not alive:
            break
        if params.max_seconds is not None and clock.now() > params.max_seconds:
            truncated = f"time limit of {params.max_seconds:.0f} s"
            break
        rows = torch.tensor(alive, device=device)
        block = torch.full((len(alive), L), mask_id, dtype=torch.long, device=device)
        step_of = torch.full_like(block, -1)
        conf_of = torch.zeros(block.shape, dtype=torch.float32, device=device)
        i = 0
        while True:
            masked = block == mask_id
            active = masked.any(-1).nonzero().squeeze(-1)  # host sync the algorithm needs anyway
            if i > 0:
                clock.tick()
            if active.numel() == 0:
                break
            logits = backend.block_logits(ctx, block[active], rows[active])
            x0, conf, probs = sample_tokens(logits, params.temperature, params.top_k, params.top_p, gen)
            m = masked[active]
            forced = None
            if i >= params.steps:  # step limit: the MASK token was sampled; commit the best real token
                probs_real = probs.clone()
                probs_real[..., mask_id] = -1.0
                x0 = probs_real.argmax(-1)
                conf = torch.gather(probs, -1, x0.unsqueeze(-1)).squeeze(-1)
                commit = m
                forced = m
            else:
                commit = select_commits(params.strategy, conf, m, schedule[i], params.threshold, gen)
                commit = commit & (x0 != mask_id)  # a sampled MASK leaves the position masked
            block[active] = torch.where(commit, x0, block[active])
            step_of[active] = torch.where(commit, tick, step_of[active])
            conf_of[active] = torch.where(commit, conf, conf_of[active])
            recorder.add(rows[active], b * L, m, x0, conf, commit, probs, tick, b, forced)
            seq_forwards += active.numel()
            batched += 1
            tick += 1
            i += 1
        backend.commit_block(ctx, block, rows)
        commit_passes += len(alive)
        batched += 1
        recorder.flush(clock)
        host_block, host_step, host_conf = block.cpu().tolist(), step_of.cpu().tolist(), conf_of.cpu().tolist()
        for j, r in enumerate(alive):
            out_ids[r].extend(host_block[j])
            out_clock[r].extend(host_step[j])
            out_conf[r].extend(host_conf[j])
        hit = torch.isin(block, stop_ids).any(-1).cpu().tolist()
        for j, r in enumerate(alive):
            stopped[r] = stopped[r] or hit[j]
        if progress:
            progress(b + 1, n_blocks)
    n_generated = [len(x) for x in out_ids]
    for r in range(n_rows):  # truncate at the first stop token (kept, flagged in the trace)
        cut = next((k + 1 for k, t in enumerate(out_ids[r]) if t in backend.stop_ids), len(out_ids[r]))
        out_ids[r], out_clock[r], out_conf[r] = out_ids[r][:cut], out_clock[r][:cut], out_conf[r][:cut]
    trace_params = {
        "decoder": "diffusion", **asdict(params), "n_regions": n_rows,
        "prefill_block": params.block_length if getattr(backend, "prefill_follows_block_length", False) else None,
        "exec_mode": getattr(backend, "exec_mode", "eager"),
    }
    return build_trace(
        decoder="diffusion", backend=backend, page=page, regions=regions, params=trace_params,
        ids=out_ids, commit_clock=out_clock, confidence=out_conf, n_generated=n_generated,
        region_prefill=[clock.prefill_s] * n_rows, recorder=recorder, clock=clock,
        seq_forwards=seq_forwards, commit_passes=commit_passes, batched_forwards=batched, ctx=ctx,
        truncated=truncated,
    )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
