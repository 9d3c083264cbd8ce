"""The contract between the decoders and the models.

Decoders do not know which model runs; backends do not know which decoding policy runs. Every
attribute and method the pipeline and the decoders use is declared on :class:`Backend`, with a
default where one makes sense; a backend subclasses it, sets its attributes in ``__init__`` and
implements the methods of the decoder family it serves:

- diffusion: ``block_logits`` (a block against the cache, nothing stored) and ``commit_block``;
- ar: ``first_logits`` (from the prefill) and ``next_logits`` (one token per row, stored).

A backend decodes a batch of *regions* of one page (text blocks for the nano models, the page or
layout blocks for the real model). ``encode`` runs the vision encoder and the prompt prefill for
all of them and returns an opaque context that holds the KV cache. Rows of the batch are
addressed by ``rows`` (indices into the regions), so finished regions drop out of later forwards.
New model types are registered with :func:`models.registry.register_backend`.
"""

from __future__ import annotations

from typing import Any

import torch

from mudiff_viz.core.types import Box, Region


class Backend:
    # identity (the trace's ``model`` record)
    name: str
    spec: str
    params_m: float
    device: torch.device
    kind: str  # "diffusion" | "ar": the decoder family these weights serve
    exec_mode: str = "eager"  # how forwards run: "eager" | "cuda-graphs"
    # tokens
    mask_id: int | None = None  # the MASK token (diffusion)
    stop_ids: frozenset[int] = frozenset()
    # what the model can do
    max_answer: int | None = None  # tokens per region it is built for (None: only the decode limits)
    batches_regions: bool = False  # True: all regions of a page decode as one batch; else one at a time
    prefill_follows_block_length: bool = False  # the prompt is prefilled in blocks of the decode's block length
    supports_layout: bool = False  # has a layout prompt: the two-stage parse (mode "layout") works

    # ---- every backend ---------------------------------------------------------------------------

    def regions(self, page: Any) -> list[Region]:
        """How this model splits a page into regions (text blocks, or the whole page)."""
        raise NotImplementedError

    def encode(self, page: Any, regions: list[Region], block_length: int | None = None) -> Any:
        """Vision encoder + prompt prefill for all regions; returns a context with the KV cache.

        ``block_length``: the diffusion decode's block length (MinerU-Diffusion prefills the prompt
        in blocks of it); None for AR decodes."""
        raise NotImplementedError

    def token_text(self, token_id: int) -> str:
        """Display text of one token id."""
        raise NotImplementedError

    def token_texts(self, ids: list[int]) -> list[str]:
        """Display text per token of a whole sequence (byte-level BPE tokens can split a character)."""
        return [self.token_text(i) for i in ids]

    def detokenize(self, ids: list[int]) -> str:
        """Text of a sequence of ids (special tokens dropped)."""
        raise NotImplementedError

    def token_boxes(self, page: Any, region: Region, ctx: Any, row: int, ids: list[int]) -> list[Box | None] | None:
        """Page boxes of decoded tokens when the page has no ground truth (None: not known)."""
        return None

    # ---- diffusion ---------------------------------------------------------------------------------

    def block_logits(self, ctx: Any, block: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Logits (b, L, V) for a block (b, L) of the given rows; attends to cache + block; stores nothing."""
        raise NotImplementedError(f"{self.name} does not run the diffusion decoder")

    def commit_block(self, ctx: Any, block: torch.Tensor, rows: torch.Tensor) -> None:
        """Forward the finished block for the given rows and append its keys/values to the cache."""
        raise NotImplementedError(f"{self.name} does not run the diffusion decoder")

    def denoise_step(self, ctx: Any, block: torch.Tensor, rows: torch.Tensor, masked: torch.Tensor, scheduler: Any,
                     step_index: int) -> Any:
        """One denoising step: the block's logits and the scheduler's decision (a StepOutput).
        Backends that run both as one captured graph override this; the default composes them."""
        return scheduler.step(self.block_logits(ctx, block, rows), masked, step_index)

    # ---- autoregressive ------------------------------------------------------------------------------

    def first_logits(self, ctx: Any) -> torch.Tensor:
        """Logits (B, V) for the first answer token, from the prefill."""
        raise NotImplementedError(f"{self.name} does not run the AR decoder")

    def next_logits(self, ctx: Any, tokens: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Append one token (b,) per given row to the cache and return logits (b, V) for the next."""
        raise NotImplementedError(f"{self.name} does not run the AR decoder")

    # ---- two-stage parse (supports_layout) ------------------------------------------------------------

    def layout_region(self, page: Any, wording: str) -> Region:
        """The whole page as the layout pass's region, asked with the given prompt wording."""
        raise NotImplementedError(f"{self.name} has no layout prompt")

    def parse_layout(self, text: str, page: Any) -> list[Region]:
        """The layout pass's answer -> regions to recognise, in reading order."""
        raise NotImplementedError(f"{self.name} has no layout prompt")
