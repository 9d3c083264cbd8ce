"""The protocols the decoders call. Decoders do not know which model runs; backends do not know
which decoding policy runs.

A backend decodes a batch of *regions* of one page (text lines for the nano models, the page or
layout blocks for the real model). ``encode`` runs the vision encoder and the prompt prefill for all
of them and returns an opaque context that holds the KV cache. Rows of the batch are addressed by
``rows`` (indices into the regions) so finished regions drop out of later forwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

Box = tuple[float, float, float, float]


@dataclass
class Region:
    """What gets decoded: a page-pixel box, plus ground truth when the page has a text layer."""

    bbox: Box
    kind: str = "text"  # text | title | table | formula | layout | page ...
    gt_text: str | None = None
    gt_chars: list[tuple[str, Box]] | None = None  # ground-truth characters with page boxes
    prompt: str | None = None  # task prompt for models that take one (real model)
    meta: dict = field(default_factory=dict)


@runtime_checkable
class Backend(Protocol):
    name: str
    spec: str
    params_m: float
    device: torch.device
    stop_ids: frozenset[int]

    def regions(self, page: Any) -> list[Region]:
        """How this model splits a page into regions (lines, blocks or the whole page)."""

    def encode(self, page: Any, regions: list[Region], block_length: int | None = None) -> Any:
        """Vision encoder + prompt prefill for all regions; returns a context with the KV cache.

        ``block_length``: the diffusion decode's block length (MinerU-Diffusion prefills the prompt
        in blocks of it); None for AR decodes."""

    def token_text(self, token_id: int) -> str:
        """Display text of one token id."""

    def detokenize(self, ids: list[int]) -> str:
        """Text of a sequence of ids (special tokens dropped)."""

    # Optional: ``token_texts(ids) -> list[str]``, display text per token of a whole sequence, for
    # tokenizers whose tokens can split a character (byte-level BPE). Falls back to token_text.

    def token_boxes(self, page: Any, region: Region, ctx: Any, row: int, ids: list[int]) -> list[Box | None] | None:
        """Optional page boxes for decoded tokens when no ground truth exists (None: not known)."""


@runtime_checkable
class DiffusionBackend(Backend, Protocol):
    mask_id: int

    def block_logits(self, ctx: Any, block: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Logits (b, L, V) for a block (b, L) of the given rows; attends to cache + block; stores nothing."""

    def commit_block(self, ctx: Any, block: torch.Tensor, rows: torch.Tensor) -> None:
        """Forward the finished block for the given rows and append its keys/values to the cache."""


@runtime_checkable
class ARBackend(Backend, Protocol):
    def first_logits(self, ctx: Any) -> torch.Tensor:
        """Logits (B, V) for the first answer token, from the prefill."""

    def next_logits(self, ctx: Any, tokens: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Append one token (b,) per given row to the cache and return logits (b, V) for the next."""
