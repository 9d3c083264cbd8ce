"""Commit strategies: which still-masked positions a denoising step commits.

A strategy is a pure tensor function registered by name; the CLI's and the app's choices come from
this registry. Adding one is one function in one file::

    @register_strategy("rightmost_first", "commit the quota from the right end of the block")
    def rightmost_first(step: CommitInputs) -> torch.Tensor:
        pos = torch.arange(step.masked.shape[-1], device=step.masked.device, dtype=torch.float32)
        return top_by_score(pos.expand(step.masked.shape), step.quota)

The scheduler clamps the quota to the masked positions left and keeps only masked positions of
whatever a strategy returns, so no strategy can re-commit a decoded position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class CommitInputs:
    confidence: torch.Tensor  # (b, L) probability of each position's guess; -inf where not masked
    masked: torch.Tensor  # (b, L) bool: still masked before this step
    quota: torch.Tensor  # (b,) positions to commit at least (already clamped to the masked count)
    threshold: float
    generator: torch.Generator | None
    guesses: torch.Tensor | None = None  # (b, L) the token each position would commit (for diagnostics)


Strategy = Callable[[CommitInputs], torch.Tensor]


@dataclass(frozen=True)
class StrategyInfo:
    name: str
    help: str
    select: Strategy


STRATEGIES: dict[str, StrategyInfo] = {}


def register_strategy(name: str, help: str) -> Callable[[Strategy], Strategy]:
    """Register ``fn(CommitInputs) -> bool (b, L)`` under ``name`` (its choices in the CLI and the app)."""

    def add(fn: Strategy) -> Strategy:
        STRATEGIES[name] = StrategyInfo(name, help, fn)
        return fn

    return add


def strategy_names() -> tuple[str, ...]:
    return tuple(STRATEGIES)


def top_by_score(score: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Boolean (b, L): the ``count[i]`` highest-scoring positions of each row (ties: leftmost)."""
    order = torch.sort(score, dim=-1, descending=True, stable=True).indices
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(score.shape[-1], device=score.device).expand_as(order))
    return rank < count.unsqueeze(-1)


def passing_or(step: CommitInputs, fallback: torch.Tensor) -> torch.Tensor:
    """Every masked guess above the threshold where at least the quota pass, else ``fallback``."""
    high = (step.confidence > step.threshold) & step.masked
    use_high = high.sum(-1) >= step.quota
    return torch.where(use_high.unsqueeze(-1), high, fallback)


@register_strategy("low_confidence_dynamic", "the release's: every guess above the threshold, at least the quota")
def low_confidence_dynamic(step: CommitInputs) -> torch.Tensor:
    return passing_or(step, top_by_score(step.confidence, step.quota))


@register_strategy("low_confidence_static", "exactly the quota, most confident first")
def low_confidence_static(step: CommitInputs) -> torch.Tensor:
    return top_by_score(step.confidence, step.quota)


@register_strategy("random", "the quota at random positions")
def random_order(step: CommitInputs) -> torch.Tensor:
    noise = torch.rand(step.masked.shape, generator=step.generator, device=step.masked.device)
    return top_by_score(torch.where(step.masked, noise, torch.full_like(noise, -1.0)), step.quota)


@register_strategy("left_to_right", "the quota, leftmost first (AR order on the diffusion model)")
def left_to_right(step: CommitInputs) -> torch.Tensor:
    pos = -torch.arange(step.masked.shape[-1], device=step.masked.device, dtype=torch.float32).expand(step.masked.shape)
    return top_by_score(torch.where(step.masked, pos, torch.full_like(pos, float("-inf"))), step.quota)


@register_strategy("frontier_fallback",
                   "every guess above the threshold, else the quota leftmost first (the release's, falling back at the frontier)")
def frontier_fallback(step: CommitInputs) -> torch.Tensor:
    """The release's rule with one change: when too few guesses pass, commit next to the text already
    there instead of the most confident guess anywhere. A small model's far guesses sit at estimated
    positions; committed early, they make the rest of the block misread (docs/nano-models.md)."""
    return passing_or(step, left_to_right(step))
