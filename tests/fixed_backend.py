"""A test-only backend with hand-built logits, so decoding order is known and reproducible.

Logits at absolute position p of row r are ``base[r, p]`` plus a bonus on that position's favourite
token that grows with the number of already decoded positions in the block, so confidences rise as
a block fills (like a real model). MASK gets -inf unless a test asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from models.base import Backend
from mudiff_viz.core.types import Region

LETTERS = "abcdefgh"
MASK, EOS = 8, 9
V = 10


@dataclass
class FixedContext:
    length: int  # decoded positions stored in the "cache"
    stored: list[list[int]]


class FixedPage:
    """Tall enough for every row the backend lays out (rows of 10 pixels; a trace's boxes must lie on its page)."""

    width, height = 100, 1000

    def info(self) -> dict:
        return {"width": 100, "height": 1000, "source": "fixed", "page_index": 0, "sha256": ""}


class FixedBackend(Backend):
    kind = "diffusion"
    batches_regions = True
    name = "fixed"
    spec = "fixed"
    params_m = 0.0
    device = torch.device("cpu")
    mask_id = MASK
    stop_ids = frozenset({EOS})

    def __init__(self, n_rows: int = 1, max_len: int = 256, seed: int = 0, bonus: float = 0.8,
                 eos_at: dict[int, int] | None = None, mask_logit: float | None = None, scale: float = 2.5) -> None:
        g = torch.Generator().manual_seed(seed)
        self.base = torch.randn(n_rows, max_len, V, generator=g) * scale
        self.base[..., MASK] = float("-inf") if mask_logit is None else mask_logit
        self.base[..., EOS] -= 4.0
        for row, pos in (eos_at or {}).items():
            self.base[row, pos, EOS] = self.base[row, pos].max() + 12.0
        self.fav = self.base.argmax(-1)
        self.bonus = bonus
        self.n_rows = n_rows
        self.calls = {"block": 0, "commit": 0, "next": 0}

    def regions(self, page) -> list[Region]:
        return [Region(bbox=(0, 10 * i, 100, 10 * i + 9)) for i in range(self.n_rows)]

    def encode(self, page, regions, block_length=None) -> FixedContext:
        return FixedContext(length=0, stored=[[] for _ in regions])

    def token_text(self, token_id: int) -> str:
        return LETTERS[token_id] if token_id < len(LETTERS) else {MASK: "<mask>", EOS: "<eos>"}[token_id]

    def detokenize(self, ids) -> str:
        return "".join(LETTERS[i] for i in ids if i < len(LETTERS))

    def logits_for(self, row: int, start: int, block: torch.Tensor) -> torch.Tensor:
        """(L, V) logits for one row's block starting at absolute position ``start``."""
        n = block.shape[-1]
        out = self.base[row, start : start + n].clone()
        filled = int((block != MASK).sum())
        out.scatter_add_(1, self.fav[row, start : start + n, None], torch.full((n, 1), self.bonus * filled))
        return out

    def block_logits(self, ctx: FixedContext, block: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        self.calls["block"] += 1
        return torch.stack([self.logits_for(int(r), ctx.length, block[i]) for i, r in enumerate(rows)])

    def commit_block(self, ctx: FixedContext, block: torch.Tensor, rows: torch.Tensor) -> None:
        self.calls["commit"] += 1
        for i, r in enumerate(rows.tolist()):
            ctx.stored[r].extend(block[i].tolist())
        ctx.length += block.shape[1]

    # AR side: next-token logits are the base logits at the next position
    def first_logits(self, ctx: FixedContext) -> torch.Tensor:
        return self.base[:, 0].clone()

    def next_logits(self, ctx: FixedContext, tokens: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        self.calls["next"] += 1
        ctx.length += 1
        return self.base[rows, ctx.length].clone()
