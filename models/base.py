"""The contract between the decoders and the models: one small base class and four protocols.

Decoders do not know which model runs; backends do not know which decoding policy runs. Every
backend subclasses :class:`Backend` (identity, tokens, regions, the prefill) and implements the
protocol of the decoder family it serves; the decoders annotate what they need and the pipeline
asks ``isinstance`` (the protocols are runtime-checkable), never a capability flag:

- :class:`BlockDenoiser` (the diffusion decoder): ``block_logits`` (a block against the cache,
  nothing stored) and ``commit_block``;
- :class:`StepCapturer` (optional, diffusion): runs a block forward and the policy's step as one
  captured graph; the policy is a pure function handed in (:class:`StepPolicy`);
- :class:`NextTokenModel` (the AR decoder): ``first_logits`` (from the prefill) and ``next_logits``;
- :class:`LayoutParser` (the two-stage parse): ``layout_region`` and ``parse_layout``.

A backend decodes a batch of *regions* of one page (text blocks for the nano models, the page or
layout blocks for the real model). ``encode`` runs the vision encoder and the prompt prefill for
all of them and returns an opaque context that holds the KV cache. Rows of the batch are
addressed by ``rows`` (indices into the regions), so finished regions drop out of later forwards.
New model types are registered with :func:`models.registry.register_backend`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

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
    # how it decodes
    max_answer: int | None = None  # tokens per region it is built for (None: only the decode limits)
    batches_regions: bool = False  # True: all regions of a page decode as one batch; else one at a time
    prefill_follows_block_length: bool = False  # the prompt is prefilled in blocks of the decode's block length

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


@runtime_checkable
class BlockDenoiser(Protocol):
    """What the diffusion decoder needs of a model."""

    mask_id: int | None

    def block_logits(self, ctx: Any, block: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Logits (b, L, V) for a block (b, L) of the given rows; attends to cache + block; stores nothing."""

    def commit_block(self, ctx: Any, block: torch.Tensor, rows: torch.Tensor) -> None:
        """Forward the finished block for the given rows and append its keys/values to the cache."""


@runtime_checkable
class StepPolicy(Protocol):
    """A diffusion policy's pure step, as a :class:`StepCapturer` calls it inside a captured graph.

    ``step(logits, masked, i)`` takes ``i`` as an int or a 0-d device tensor below ``limit``;
    ``force`` is the step limit's rule; equal ``key``s compute the same function; ``capturable``
    means no random numbers are drawn."""

    key: tuple
    capturable: bool
    limit: int
    mask_id: int

    def step(self, logits: torch.Tensor, masked: torch.Tensor, step_index: int | torch.Tensor) -> Any: ...

    def force(self, logits: torch.Tensor, masked: torch.Tensor) -> Any: ...

    def __call__(self, logits: torch.Tensor, masked: torch.Tensor, step_index: int) -> Any: ...


@runtime_checkable
class StepCapturer(Protocol):
    """A block denoiser that runs a block forward and the policy's step as one captured graph."""

    def captured_step(self, ctx: Any, block: torch.Tensor, rows: torch.Tensor, policy: StepPolicy,
                      step_index: int) -> Any:
        """The policy's StepOutput for this block, with no host round trip between forward and step."""


@runtime_checkable
class NextTokenModel(Protocol):
    """What the AR decoder needs of a model."""

    def first_logits(self, ctx: Any) -> torch.Tensor:
        """Logits (B, V) for the first answer token, from the prefill."""

    def next_logits(self, ctx: Any, tokens: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Append one token (b,) per given row to the cache and return logits (b, V) for the next."""


@runtime_checkable
class LayoutParser(Protocol):
    """A model with a layout prompt: the two-stage parse (mode "layout") runs on it."""

    def layout_region(self, page: Any, wording: str) -> Region:
        """The whole page as the layout pass's region, asked with the given prompt wording."""

    def parse_layout(self, text: str, page: Any) -> list[Region]:
        """The layout pass's answer -> regions to recognise, in reading order."""
