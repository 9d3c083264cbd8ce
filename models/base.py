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
- :class:`LayoutParser` (the two-stage parse): ``layout_region`` and ``parse_layout``;
- :class:`Speculator` (the draft-and-verify decoders): ``spec_forward`` (one forward with the
  attention layout a :class:`SpecLayout` describes: clean tokens stored tentatively, verify queries,
  draft masks) and ``keep`` (only an accepted prefix of the clean tokens stays in the cache).

A backend decodes a batch of *regions* of one page (text blocks or lines for the nano models, found
by ``mudiff_viz.inputs`` in the unit the backend names in ``region_unit``; the page or layout blocks
for the real model). ``encode`` runs the vision encoder and the prompt prefill for
all of them and returns an opaque context that holds the KV cache. Rows of the batch are
addressed by ``rows`` (indices into the regions), so finished regions drop out of later forwards.
New model types are registered with :func:`models.registry.register_backend`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from mudiff_viz.core.types import Box, Region, RegionUnit


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
    can_batch_regions: bool = False  # True: decodes several regions as one batch when asked (batch_regions=True)
    prefill_follows_block_length: bool = False  # the prompt is prefilled in blocks of the decode's block length
    # what a draft-and-verify decode of these weights drafts when the knobs leave it to the model
    # (draft_length 0, draft_branches auto): the settings measured fastest (docs/speculative.md#the-models-own-draft-settings)
    draft_length: int = 8
    draft_branches: str = "masks"
    # the AR repetition rules its own client uses: {set name: {task: RepetitionRules fields}}, the
    # default set first (mudiff_viz/decoding/repetition.py; the ``repetition`` knob's ``auto``)
    client_repetition: dict[str, dict[str, dict[str, float]]] = {}
    # the page as this model reads it: straightened and relit first (mudiff_viz/inputs/scan.py), as
    # the nano pairs were trained; a model that is shipped without it (MinerU) says False
    straightens: bool = True
    # per-task token limits of the model's shipped client ({task: tokens}; empty: none but max tokens)
    task_tokens: dict[str, int] = {}
    # regions: the unit mudiff_viz.inputs cuts the page into for this model (lines, text blocks),
    # handed in by the pipeline; None: the model makes its own with regions() (the whole page)
    region_unit: RegionUnit | None = None

    def regions(self, page: Any) -> list[Region]:
        """This model's own regions of a page (the whole page), for a backend with no ``region_unit``."""
        raise NotImplementedError

    def encode(self, page: Any, regions: list[Region], block_length: int | None = None) -> Any:
        """Vision encoder + prompt prefill for all regions; returns a context with the KV cache.

        ``block_length``: the diffusion decode's block length (MinerU-Diffusion prefills the prompt
        in blocks of it); None for AR decodes. A backend with a model knob's attribute (settings
        ``Knob.needs``, e.g. the nano pairs' ``anchor_reach``) also takes it here by that name, for
        this decode only (DecodeRun.encode hands it over)."""
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

    def vocabulary(self) -> str:
        """A fingerprint of what the token ids mean: backends with equal ones can exchange token ids
        (one drafts, the other verifies)."""
        raise NotImplementedError

    def token_boxes(self, page: Any, region: Region, ctx: Any, row: int, ids: list[int]) -> list[Box | None] | None:
        """Page boxes of decoded tokens when the page has no ground truth (None: not known)."""
        return None


def fingerprint(token_texts: Iterable[str]) -> str:
    """A short digest of a vocabulary, id by id (:meth:`Backend.vocabulary`)."""
    h = hashlib.sha256()
    for text in token_texts:
        h.update(text.encode("utf-8", "surrogatepass") + b"\x00")
    return h.hexdigest()[:16]


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

    def parse_layout(self, text: str, page: Any, rules: str) -> list[Region]:
        """The layout pass's answer -> regions to recognise, in reading order, under the named rules."""


@dataclass
class SpecLayout:
    """What one draft-and-verify forward holds for each of its rows, after the row's cache:

    - ``clean`` (b, n): tokens written to the cache *tentatively*, as a causal chain (clean token i
      sees the cache, clean tokens 0..i of its row and nothing else): the keys/values a one-token-
      at-a-time decode would have stored for them. ``n_clean`` (b,) says how many are real per row;
      the rest is padding no query sees.
    - verify queries: one after ``clean[:j]`` for each ``j`` in ``queries_from .. n``; query j gives
      the model's next-token logits after that prefix, as its one-token-at-a-time decode would
      (a diffusion model: a MASK at the next position that sees the cache, ``clean[:j]`` and itself,
      i.e. block size 1; an AR model: its logits at ``clean[j - 1]``, so ``queries_from >= 1``).
    - draft masks (diffusion models only), ``n_drafts`` of them in each draft block. Unbranched: one
      block after each row's real clean tokens (every draft sees the cache, the row's clean tokens and
      every draft of the block). ``branched``: one block after each verify query, continuing it as
      if the query were the block's first mask: branch j's drafts see the cache, ``clean[:j]``, query
      j and each other (the query does not see them, so it stays the block-size-1 prediction). Branch
      j is what to draft next if the verifier stops at query j.
    - ``anchors`` (b, m), branched only: a guess at the token each of the first ``m`` queries will
      give, and a second branch per guess: ``[anchor_j ; n_drafts masks]``, a diffusion block whose
      first token is known, after ``clean[:j]`` (the anchor sits where query j sits and sees what it
      sees; the block sees itself). When query j's token turns out to be anchor j, this branch's
      drafts were made knowing it, where branch j's were made with that position still masked.
    """

    clean: torch.Tensor
    n_clean: torch.Tensor
    queries_from: int
    n_drafts: int
    branched: bool = False
    anchors: torch.Tensor | None = None

    @property
    def n_queries(self) -> int:
        return self.clean.shape[1] - self.queries_from + 1

    @property
    def n_draft_tokens(self) -> int:
        return self.n_drafts * (self.n_queries if self.branched else 1)

    @property
    def n_anchored(self) -> int:
        """Queries with an anchored branch (the first ones)."""
        return 0 if self.anchors is None else self.anchors.shape[1]

    @property
    def n_anchored_tokens(self) -> int:
        return self.n_anchored * (1 + self.n_drafts)

    def query_prefix(self) -> torch.Tensor:
        """(n_queries,) how many clean tokens each verify query comes after."""
        return torch.arange(self.queries_from, self.clean.shape[1] + 1, device=self.clean.device)

    def width(self, with_queries: bool = True) -> int:
        """Tokens in the forward."""
        return self.clean.shape[1] + (self.n_queries if with_queries else 0) + self.n_draft_tokens + self.n_anchored_tokens

    def after_clean(self, mask_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The forward's tokens after the clean ones, in :meth:`attention`'s order, and each one's
        answer offset (how many answer tokens precede it, counted from the first clean token), both
        (b, width - n): MASK everywhere but at the anchors. A model whose positions count answer
        tokens places token t at its row's first clean position + offset."""
        b, n = self.clean.shape
        dev = self.clean.device
        j = self.query_prefix()
        w, steps = self.n_drafts, torch.arange(self.n_drafts, device=dev)
        offsets = [j[None, :].expand(b, -1)]
        if self.branched:
            offsets.append((j[:, None] + 1 + steps[None, :]).reshape(1, -1).expand(b, -1))
        elif w:
            offsets.append(self.n_clean[:, None] + steps[None, :])
        if self.n_anchored:
            within = torch.arange(1 + w, device=dev)
            offsets.append((j[: self.n_anchored, None] + within[None, :]).reshape(1, -1).expand(b, -1))
        offsets = torch.cat(offsets, 1)
        ids = torch.full(offsets.shape, mask_id, dtype=torch.long, device=dev)
        if self.n_anchored:
            at = offsets.shape[1] - self.n_anchored_tokens + torch.arange(self.n_anchored, device=dev) * (1 + w)
            ids[:, at] = self.anchors
        return ids, offsets

    def after_clean_prefix(self) -> torch.Tensor:
        """(b, width - n), in :meth:`after_clean`'s order: how many clean tokens each token after the
        clean ones follows (a verify query and its branch: the query's prefix; an unbranched draft
        block: the row's clean tokens). A model whose positions move with the committed text (glyph
        anchoring, models/nano/anchor.py) places each token after that prefix."""
        b = self.clean.shape[0]
        j = self.query_prefix()
        w = self.n_drafts
        parts = [j[None, :].expand(b, -1)]
        if self.branched:
            parts.append(j.repeat_interleave(w)[None, :].expand(b, -1))
        elif w:
            parts.append(self.n_clean[:, None].expand(b, w))
        if self.n_anchored:
            parts.append(j[: self.n_anchored].repeat_interleave(1 + w)[None, :].expand(b, -1))
        return torch.cat(parts, 1)

    def split(self, after: torch.Tensor) -> "SpecLogits":
        """The logits of the tokens after the clean ones (b, width - n, V), in :meth:`after_clean`'s
        order, as SpecLogits: the verify queries', the draft blocks' and the anchored branches'
        masks (their anchors dropped)."""
        nq, nd, w = self.n_queries, self.n_draft_tokens, self.n_drafts
        anchored = None
        if self.n_anchored:
            blocks = after[:, nq + nd :].reshape(after.shape[0], self.n_anchored, 1 + w, -1)
            anchored = blocks[:, :, 1:].reshape(after.shape[0], -1, after.shape[-1])
        return SpecLogits(after[:, :nq], after[:, nq : nq + nd], anchored)

    def attention(self, with_queries: bool = True) -> torch.Tensor:
        """(b, T, T) bool, True = may attend, among the forward's tokens in the order
        [clean ; verify queries ; drafts (branch by branch)] (``with_queries=False``: an AR model,
        whose queries are the clean tokens themselves). Every token also sees its row's cache."""
        b, n = self.clean.shape
        dev = self.clean.device
        nq = self.n_queries if with_queries else 0
        w, t = self.n_drafts, self.width(with_queries)
        real = torch.arange(n, device=dev)[None, :] < self.n_clean[:, None]  # (b, n)
        att = torch.zeros(b, t, t, dtype=torch.bool, device=dev)
        k = torch.arange(n, device=dev)
        att[:, :n, :n] = (k[None, :] <= k[:, None])[None] & real[:, None, :]  # causal over the real clean tokens
        if nq:
            prefix = self.query_prefix()
            att[:, n : n + nq, :n] = (k[None, :] < prefix[:, None])[None] & real[:, None, :]
            att[:, n : n + nq, n : n + nq] = torch.eye(nq, dtype=torch.bool, device=dev)  # each query sees itself
        if w and self.branched:
            for q in range(nq):
                at = n + nq + q * w
                att[:, at : at + w, :n] = att[:, n + q, :n][:, None, :]  # what the query sees ...
                att[:, at : at + w, n + q] = True  # ... the query itself ...
                att[:, at : at + w, at : at + w] = True  # ... and its branch
        elif w:
            end = n + nq + w
            att[:, end - w : end, :n] = real[:, None, :]
            att[:, end - w : end, end - w : end] = True
        for q in range(self.n_anchored):  # [anchor ; masks] after clean[:prefix of query q], one block
            at = t - self.n_anchored_tokens + q * (1 + w)
            att[:, at : at + 1 + w, :n] = att[:, n + q, :n][:, None, :]
            att[:, at : at + 1 + w, at : at + 1 + w] = True
        return att


@dataclass
class SpecLogits:
    verify: torch.Tensor  # (b, n_queries, V): next-token logits after each clean prefix
    draft: torch.Tensor  # (b, n_draft_tokens, V): the draft blocks' logits, branch after branch
    anchored: torch.Tensor | None = None  # (b, n_anchored * n_drafts, V): the anchored branches' masks


@runtime_checkable
class Speculator(Protocol):
    """What the draft-and-verify decoders need of a model (decoding/speculative.py)."""

    def spec_forward(self, ctx: Any, rows: torch.Tensor, layout: SpecLayout) -> SpecLogits:
        """One forward of the given rows with ``layout``'s attention; the clean tokens' keys/values
        are written to the cache but do not count until :meth:`keep` says which."""

    def keep(self, ctx: Any, rows: torch.Tensor, n_keep: torch.Tensor) -> None:
        """After a ``spec_forward`` of the same rows: the first ``n_keep[r]`` clean tokens of each
        row stay in its cache (and move its position past them); the rest are dropped."""
