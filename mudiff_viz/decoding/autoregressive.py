"""Autoregressive decoding with a KV cache: one token per forward, every step recorded.

The same run as the diffusion decoder (clock, stopping criteria, observers, sampler); the policy is
the degenerate one: a block of one position, committed at its only step. The first token's logits
come from the prefill (so the prefill is that step's forward; its time is reported as ``prefill_s``).
Greedy by default; ``temperature > 0`` samples.
"""

from __future__ import annotations

import torch

from models.base import NextTokenModel
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.observers import ProgressFn, Snapshot, StepEvent
from mudiff_viz.decoding.repetition import RepetitionProcessor, TokenHistory, rules_for
from mudiff_viz.decoding.run import DecodeRun, observers_for
from mudiff_viz.decoding.sampling import Sampler
from mudiff_viz.decoding.scheduler import step_output
from mudiff_viz.decoding.settings import DecodeParams

CHUNK = 16  # tokens per unit of work: records move to the host, progress and snapshots, as per block


@torch.inference_mode()
def decode_autoregressive(backend: NextTokenModel, page, regions, params: DecodeParams,
                          progress: ProgressFn | None = None, snapshot: Snapshot | None = None) -> Trace:
    """Decode all ``regions`` of ``page`` token by token; returns the full Trace (``progress`` and
    ``snapshot`` as for decode_diffusion, every CHUNK tokens)."""
    params.check()
    run = DecodeRun("ar", backend, page, regions, params, observers_for(progress, snapshot))
    ctx = run.ctx = run.encode(backend)
    logits = backend.first_logits(ctx)
    run.prefill_done()
    history = repetition_history(run, backend, ctx, regions, logits.shape[-1])
    sample = Sampler.of(params, run.generator, [RepetitionProcessor(history)] if history else [])
    rows = torch.arange(len(regions), device=backend.device)
    for t in range(params.max_new_tokens):
        x, conf, probs = sample(logits[:, None])
        one = torch.ones_like(x, dtype=torch.bool)
        run.step(StepEvent(rows, t, one, step_output(x, conf, probs, one, torch.zeros_like(one)), run.forward, 0))
        host_x, host_c, host_rows = x[:, 0].tolist(), conf[:, 0].tolist(), rows.tolist()  # the sync AR needs
        if history:
            history.append(host_rows, host_x)
        for r, tok, c in zip(host_rows, host_x, host_c):
            run.states[r].extend([tok], [run.forward], [c])
        run.advance(seq_forwards=len(host_rows), batched_forwards=1, times=[run.clock.now()])
        keep = ~run.stopping.finished_rows(x)
        for r, k in zip(host_rows, keep.tolist()):
            run.states[r].stopped = not k
        if (t + 1) % CHUNK == 0:
            run.block_done(t + 1, params.max_new_tokens)
        if not bool(keep.any()) or run.halt():
            if (t + 1) % CHUNK:
                run.block_done(t + 1, params.max_new_tokens)  # the last, shorter unit of work
            break
        rows, x = rows[keep], x[keep, 0]
        if history:
            history.alive = rows
        logits = backend.next_logits(ctx, x, rows)
    return run.finish()


def repetition_history(run: DecodeRun, backend, ctx, regions, vocab: int) -> TokenHistory | None:
    """The token history the repetition rules read (None when they are off for every row); the
    trace's params record the rule set and each task's values (``repetition_applied``)."""
    tasks = [backend.task_of(r.prompt) if hasattr(backend, "task_of") else "text" for r in regions]
    name, rules = rules_for(run.params, backend, tasks)
    run.extra_params["repetition_applied"] = {"rules": name, "by_task": {t: r.to_dict() for t, r in zip(tasks, rules)}}
    if not any(r.active for r in rules):
        return None
    prompts = backend.prompt_tokens(ctx) if hasattr(backend, "prompt_tokens") else [[] for _ in regions]
    return TokenHistory(prompts, rules, vocab, backend.device)
