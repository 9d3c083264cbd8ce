"""Token sampling and the per-step quota: pure functions on batched tensors, no host sync."""

from __future__ import annotations

import torch


def quota_schedule(block_length: int, steps: int) -> list[int]:
    """Tokens to commit at each step of a block: ``block // steps``, the remainder to the first steps.

    With ``steps > block_length`` the later steps get 0 (as in the release's loop).
    """
    if block_length < 1 or steps < 1:
        raise ValueError("block_length and steps must be >= 1")
    base, rem = divmod(block_length, steps)
    return [base + (1 if i < rem else 0) for i in range(steps)]


def filter_logits(logits: torch.Tensor, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Top-k then top-p (nucleus) filtering; removed entries become -inf. Keeps at least one."""
    if top_k and 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if 0.0 < top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop_sorted = cum - sorted_logits.softmax(-1) >= top_p  # keep the token that crosses top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def sample_tokens(
    logits: torch.Tensor,
    temperature: float,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A guess and its confidence for every position: returns (x0, confidence, probs).

    ``temperature == 0`` is the deterministic mode: argmax, with confidences from the temperature-1
    softmax (temperature -> 0 would make every confidence 1 and collapse each block into one step).
    Otherwise x0 ~ softmax(filtered logits / T) and the confidence is its probability there.
    """
    logits = logits.float()
    if temperature <= 0:
        probs = filter_logits(logits, top_k, top_p).softmax(-1)
        x0 = probs.argmax(-1)
    else:
        probs = filter_logits(logits / temperature, top_k, top_p).softmax(-1)
        flat = probs.reshape(-1, probs.shape[-1])
        x0 = torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])
    conf = torch.gather(probs, -1, x0.unsqueeze(-1)).squeeze(-1)
    return x0, conf, probs
