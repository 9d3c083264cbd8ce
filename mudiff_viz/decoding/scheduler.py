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

from mudiff_viz.core.trace import TOPK
from mudiff_viz.decoding.sampling import Sampler, quota_schedule
from mudiff_viz.decoding.settings import DecodeParams
from mudiff_viz.decoding.strategies import STRATEGIES, CommitInputs


@dataclass
class StepOutput:
    x0: torch.Tensor  # (b, L) the guess at every position
    confidence: torch.Tensor  # (b, L) its probability
    committed: torch.Tensor  # (b, L) bool: positions committed by this step (a subset of the masked ones)
    forced: torch.Tensor  # (b, L) bool: committed because the step limit was reached
    top_p: torch.Tensor  # (b, L, k) the k most likely tokens' probabilities (what the trace records) ...
    top_i: torch.Tensor  # (b, L, k) ... and their ids


def step_output(x0, confidence, probs, committed, forced, k: int = TOPK) -> StepOutput:
    """What a step hands on; confidences and probabilities as float32 (exact for bfloat16 ones: the
    commits were decided in their own dtype, numerics "release")."""
    top = probs.topk(min(k, probs.shape[-1]), dim=-1)
    return StepOutput(x0, confidence.float(), committed, forced, top.values.float(), top.indices)


class BlockScheduler:
    """The diffusion decoder's policy: a pure step function of (logits, masked, step index).

    It is what ``models.base.StepPolicy`` asks of a policy, so a backend that captures a block
    forward and its step as one graph (models/mineru_diffusion/graphs.py) reads only ``key``,
    ``capturable``, ``limit``, ``mask_id``, ``step`` and ``force``, never the decode's settings.
    """

    def __init__(self, params: DecodeParams, mask_id: int, generator: torch.Generator | None,
                 dtype: torch.dtype = torch.float32) -> None:
        self.params = params
        self.mask_id = mask_id
        self.generator = generator
        self.sample = Sampler.of(params, generator, dtype=dtype)  # dtype: the probabilities' (sampling.probs_dtype)
        self.quota = quota_schedule(params.block_length, params.steps)
        self.limit = params.steps  # a step with this index force-commits what is left
        self.select = STRATEGIES[params.strategy].select
        self._quota_table: torch.Tensor | None = None

    @property
    def key(self) -> tuple:
        """What the step computes depends on (a captured graph of it is reusable for equal keys)."""
        p = self.params
        return (p.block_length, p.steps, p.threshold, p.strategy, p.temperature, p.top_k, p.top_p, self.mask_id,
                self.sample.dtype)

    @property
    def capturable(self) -> bool:
        """No random numbers: the step can be captured as a graph without a generator."""
        return self.sample.deterministic and self.params.strategy != "random"

    def __call__(self, logits: torch.Tensor, masked: torch.Tensor, step_index: int) -> StepOutput:
        return self.force(logits, masked) if step_index >= self.limit else self.step(logits, masked, step_index)

    def step(self, logits: torch.Tensor, masked: torch.Tensor, step_index: int | torch.Tensor) -> StepOutput:
        """One denoising step of a block: ``logits`` (b, L, V), ``masked`` (b, L) before the step.

        ``step_index`` is the step within the block: an int below ``limit``, or a 0-d device tensor
        (a captured graph reads it from a buffer)."""
        p = self.params
        x0, conf, probs = self.sample(logits)
        if isinstance(step_index, int):
            per_row = torch.full_like(masked[:, 0], self.quota[step_index], dtype=torch.long)
        else:
            per_row = self.quota_table(masked.device)[step_index].expand(masked.shape[0])
        quota = torch.clamp(per_row, max=masked.sum(-1))
        scores = torch.where(masked, conf, torch.full_like(conf, float("-inf")))
        chosen = self.select(CommitInputs(scores, masked, quota, p.threshold, self.generator, x0))
        committed = chosen & masked & (x0 != self.mask_id)  # a sampled MASK stays masked
        return step_output(x0, conf, probs, committed, torch.zeros_like(masked))

    def force(self, logits: torch.Tensor, masked: torch.Tensor) -> StepOutput:
        """The step limit: commit every position still masked with its best token that is not MASK
        (only a sampled MASK can leave positions open this long)."""
        _, _, probs = self.sample(logits)
        real = probs.clone()
        real[..., self.mask_id] = -1.0
        x0 = real.argmax(-1)
        conf = torch.gather(probs, -1, x0.unsqueeze(-1)).squeeze(-1)
        return step_output(x0, conf, probs, masked, masked)

    def quota_table(self, device: torch.device) -> torch.Tensor:
        if self._quota_table is None or self._quota_table.device != device:
            self._quota_table = torch.tensor(self.quota, dtype=torch.long, device=device)
        return self._quota_table
