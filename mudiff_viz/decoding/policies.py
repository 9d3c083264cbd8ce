"""Pure step logic of the samplers (like diffusers schedulers): no model, no loop, no recording.

Everything works on batched tensors on the model's device and never synchronises with the host.
"""

from __future__ import annotations

import torch

STRATEGIES = ("low_confidence_dynamic", "low_confidence_static", "random", "left_to_right")


def quota_schedule(block_length: int, steps: int) -> list[int]:
    """Tokens to commit at each step of a block: ``block // steps``, the remainder to the first steps.

    With ``steps > block_length`` the later steps get 0 (as in the official loop).
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
    """x0 guess and its confidence for every position: returns (x0, confidence, probs).

    ``temperature == 0`` is the deterministic mode: argmax, with confidences from the T = 1
    softmax (T -> 0 would make every confidence 1 and collapse each block into one step).
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


def top_by_score(score: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Boolean (b, L): the ``count[i]`` highest-scoring positions of each row (ties: leftmost)."""
    order = torch.sort(score, dim=-1, descending=True, stable=True).indices
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(score.shape[-1], device=score.device).expand_as(order))
    return rank < count.unsqueeze(-1)


def select_commits(
    strategy: str,
    confidence: torch.Tensor,
    masked: torch.Tensor,
    quota: int,
    threshold: float,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Which masked positions to commit this step (boolean, same shape as ``masked``).

    The quota is clamped to the masked positions left, so an already decoded position can never
    be picked again (the official ``topk`` can, when steps < block length).
    """
    n_masked = masked.sum(-1)
    q = torch.clamp(torch.full_like(n_masked, quota), max=n_masked)
    neg = torch.tensor(float("-inf"), device=confidence.device)
    conf = torch.where(masked, confidence, neg)
    if strategy == "low_confidence_dynamic":
        high = (conf > threshold) & masked
        use_high = high.sum(-1) >= q
        return torch.where(use_high.unsqueeze(-1), high, top_by_score(conf, q) & masked)
    if strategy == "low_confidence_static":
        return top_by_score(conf, q) & masked
    if strategy == "random":
        noise = torch.rand(masked.shape, generator=generator, device=masked.device)
        return top_by_score(torch.where(masked, noise, neg), q) & masked
    if strategy == "left_to_right":
        pos = -torch.arange(masked.shape[-1], device=masked.device, dtype=torch.float32).expand(masked.shape)
        return top_by_score(torch.where(masked, pos, neg), q) & masked
    raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
