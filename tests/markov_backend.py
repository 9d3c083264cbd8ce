"""A test-only model whose next-token distribution is known exactly: a first-order Markov chain over
a small vocabulary, behind the draft-and-verify protocol (models/base.py ``Speculator``).

Its verify queries (and its AR side) give ``table[previous token]``; its draft blocks give
``drafts[previous token]`` (a different, worse table), so a speculative decode of it has a known
target distribution and drafts that are often rejected. Rows are independent samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from models.base import Backend, SpecLayout, SpecLogits, fingerprint
from mudiff_viz.core.types import Region

V = 5  # tokens 0..2 are letters, 3 is the stop token, 4 is MASK
MASK, STOP = 4, 3
START = 0  # the "previous token" of the first position


def tables(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(V, V, generator=g) * 1.2
    drafts = torch.randn(V, V, generator=g) * 1.2
    for t in (table, drafts):
        t[:, MASK] = float("-inf")
    return table, drafts


@dataclass
class MarkovContext:
    last: torch.Tensor  # (B,) the last stored token of each row (START before any)
    tentative: tuple | None = None
    stored: list = field(default_factory=list)


class MarkovBackend(Backend):
    batches_regions = True
    params_m = 0.0
    device = torch.device("cpu")
    stop_ids = frozenset({STOP})

    def __init__(self, kind: str = "diffusion", n_rows: int = 1, seed: int = 0) -> None:
        self.kind = kind
        self.name = self.spec = f"markov-{kind}"
        self.mask_id = MASK if kind == "diffusion" else None
        self.table, self.draft_table = tables(seed)
        self.n_rows = n_rows

    def regions(self, page) -> list[Region]:
        return [Region(bbox=(0, 0, 10, 10)) for _ in range(self.n_rows)]

    def encode(self, page, regions, block_length=None) -> MarkovContext:
        return MarkovContext(torch.full((len(regions),), START, dtype=torch.long))

    def token_text(self, token_id: int) -> str:
        return "abc"[token_id] if token_id < 3 else {STOP: "", MASK: "<mask>"}[token_id]

    def detokenize(self, ids) -> str:
        return "".join("abc"[i] for i in ids if i < 3)

    def vocabulary(self) -> str:
        return fingerprint(self.token_text(i) for i in range(V))

    # the one-token-at-a-time decodes
    def first_logits(self, ctx: MarkovContext) -> torch.Tensor:
        return self.table[ctx.last].clone()

    def next_logits(self, ctx: MarkovContext, tokens: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        ctx.last[rows] = tokens
        return self.table[tokens].clone()

    def block_logits(self, ctx: MarkovContext, block: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        prev = torch.cat([ctx.last[rows][:, None], block[:, :-1]], 1)
        return torch.where((prev == MASK)[..., None], self.draft_table[START], self.table[prev.clamp(max=V - 1)])

    def commit_block(self, ctx: MarkovContext, block: torch.Tensor, rows: torch.Tensor) -> None:
        ctx.last[rows] = block[:, -1]

    # draft and verify
    def spec_forward(self, ctx: MarkovContext, rows: torch.Tensor, layout: SpecLayout) -> SpecLogits:
        clean, b = layout.clean, len(rows)
        chain = torch.cat([ctx.last[rows][:, None], clean], 1)  # the token before each clean prefix's next
        prev = chain[:, layout.query_prefix()]
        verify = self.table[prev]
        ctx.tentative = (rows, chain)
        w = layout.n_drafts
        if layout.branched:  # after query j: drafts from the draft table given the query's prefix
            draft = self.draft_table[prev][:, :, None].expand(-1, -1, w, -1).reshape(b, -1, V)
        else:
            last = chain.gather(1, layout.n_clean[:, None])[:, 0]
            draft = self.draft_table[last][:, None].expand(-1, w, -1)
        anchored = None
        if layout.n_anchored:  # after anchor j: drafts from the draft table given the anchor
            anchored = self.draft_table[layout.anchors][:, :, None].expand(-1, -1, w, -1).reshape(b, -1, V).clone()
        return SpecLogits(verify.clone(), draft.clone(), anchored)

    def keep(self, ctx: MarkovContext, rows: torch.Tensor, n_keep: torch.Tensor) -> None:
        kept_rows, chain = ctx.tentative
        ctx.last[kept_rows] = chain.gather(1, n_keep[:, None])[:, 0]
        ctx.tentative = None


class MarkovPage:
    width, height = 10, 10
    lines: list = []

    def info(self) -> dict:
        return {"width": 10, "height": 10, "source": "markov", "page_index": 0, "sha256": ""}


def sequence_probs(table: torch.Tensor, length: int, temperature: float = 1.0) -> dict[tuple[int, ...], float]:
    """The exact probability of every token sequence of ``length`` (a stop ends a sequence early)."""
    p = (table / temperature).softmax(-1)
    out: dict[tuple[int, ...], float] = {}

    def walk(seq: tuple[int, ...], prob: float, prev: int) -> None:
        if len(seq) == length or (seq and seq[-1] == STOP):
            out[seq] = out.get(seq, 0.0) + prob
            return
        for t in range(V):
            if p[prev, t] > 0:
                walk(seq + (t,), prob * float(p[prev, t]), t)

    walk((), 1.0, START)
    return out
