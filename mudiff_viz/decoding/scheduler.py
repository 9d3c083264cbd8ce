"""The block-diffusion scheduler: the pure step logic of one denoising step (like a diffusers
scheduler). No model, no loop, no recording, no host synchronisation.

``step(logits, masked, i)`` turns the model's logits for a block into a guess and a confidence per
position and decides which still-masked positions to commit, following the release's loop
(docs/real-models.md#the-decoding-loop) with its pitfalls fixed: the quota is clamped to the
masked positions left, ``temperature == 0`` is a real deterministic mode, a sampled MASK leaves
its position masked, and at the step limit the remaining positions are force-committed with their
best real token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mudiff_viz.decoding.sampling import quota_schedule, sample_tokens
from mudiff_viz.decoding.settings import DecodeParams
from mudiff_viz.decoding.strategies import STRATEGIES, CommitInputs


@dataclass
class StepOutput:
    x0: torch.Tensor  # (b, L) the guess at every position
    confidence: torch.Tensor  # (b, L) its probability
    probs: torch.Tensor  # (b, L, V) the distribution it was drawn from (top-k of it is recorded)
    committed: torch.Tensor  # (b, L) bool: positions committed by this step (a subset of the masked ones)
    forced: torch.Tensor  # (b, L) bool: committed because the step limit was reached


class BlockScheduler:
    def __init__(self, params: DecodeParams, mask_id: int, generator: torch.Generator | None) -> None:
        self.params = params
        self.mask_id = mask_id
        self.generator = generator
        self.quota = quota_schedule(params.block_length, params.steps)
        self.select = STRATEGIES[params.strategy].select

    def step(self, logits: torch.Tensor, masked: torch.Tensor, step_index: int) -> StepOutput:
        """One denoising step of a block: ``logits`` (b, L, V), ``masked`` (b, L) before the step."""
        p = self.params
        x0, conf, probs = sample_tokens(logits, p.temperature, p.top_k, p.top_p, self.generator)
        if step_index >= p.steps:  # the step limit: only a sampled MASK can leave positions open
            real = probs.clone()
            real[..., self.mask_id] = -1.0
            x0 = real.argmax(-1)
            conf = torch.gather(probs, -1, x0.unsqueeze(-1)).squeeze(-1)
            return StepOutput(x0, conf, probs, masked, masked)
        quota = torch.clamp(torch.full_like(masked[:, 0], self.quota[step_index], dtype=torch.long), max=masked.sum(-1))
        scores = torch.where(masked, conf, torch.full_like(conf, float("-inf")))
        chosen = self.select(CommitInputs(scores, masked, quota, p.threshold, self.generator))
        committed = chosen & masked & (x0 != self.mask_id)  # a sampled MASK stays masked
        return StepOutput(x0, conf, probs, committed, torch.zeros_like(masked))
