"""The batched KV cache both nano backends decode with: every row (region) at the same length.

Keys/values are written in place (no concatenation per step). Rows that finish are dropped the next
time the cache is written for the others. A forward for some of the rows (those still denoising
while the others' blocks are done) first moves those rows to the front of the cache, once, and
then attends over a slice of it: the steps after it, for the same rows, copy nothing (a gather of
the rows' keys and values at every step took an eighth of a page's decode). Row i of the cache
holds region ``alive[i]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class BatchCache:
    k: list[torch.Tensor]  # per layer (B_alive, H, capacity, D)
    v: list[torch.Tensor]
    key_mask: torch.Tensor  # (B_alive, capacity) True where a key is real
    length: int  # filled slots (the same for every row)
    alive: list[int]  # region index of each cache row
    tentative: tuple[int, int, int] = (0, 0, 0)  # the last forward_tentative: (rows, first slot, tokens)

    @classmethod
    def from_prefill(cls, kv: list[tuple[torch.Tensor, torch.Tensor]], key_mask: torch.Tensor, headroom: int = 128) -> "BatchCache":
        """The prompt's keys/values (per layer (B, H, P, D)) in buffers with room for ``headroom`` more."""
        b, p = key_mask.shape
        ks, vs = [], []
        for k, v in kv:
            kk, vv = k.new_zeros(b, k.shape[1], p + headroom, k.shape[3]), v.new_zeros(b, v.shape[1], p + headroom, v.shape[3])
            kk[:, :, :p], vv[:, :, :p] = k, v
            ks.append(kk)
            vs.append(vv)
        mask = torch.zeros(b, p + headroom, dtype=torch.bool, device=key_mask.device)
        mask[:, :p] = key_mask
        return cls(ks, vs, mask, p, list(range(b)))

    def _ensure(self, extra: int) -> None:
        cap = self.key_mask.shape[1]
        if self.length + extra <= cap:
            return
        grow = max(extra, cap)
        self.k = [F.pad(k, (0, 0, 0, grow)) for k in self.k]
        self.v = [F.pad(v, (0, 0, 0, grow)) for v in self.v]
        self.key_mask = F.pad(self.key_mask, (0, grow))

    def _select(self, rows: list[int]) -> None:
        """Keep the cache rows of ``rows``, in that order (the others are dropped)."""
        keep = torch.tensor([self.alive.index(r) for r in rows], device=self.key_mask.device)
        self.k = [k.index_select(0, keep) for k in self.k]
        self.v = [v.index_select(0, keep) for v in self.v]
        self.key_mask = self.key_mask.index_select(0, keep)
        self.alive = list(rows)

    def _to_front(self, rows: list[int]) -> None:
        """Order the cache so that ``rows`` come first, in that order (no row is dropped)."""
        self._select(rows + [r for r in self.alive if r not in rows])

    def forward(self, model, tokens: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor, store: bool,
                causal: bool, runs: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of ``tokens`` (b, n) for the regions ``rows``, attending to their cache and to the
        tokens themselves (causally or not); ``store`` keeps their keys/values. ``runs``: the
        tokens' masked runs, for a model whose heads look past a masked token's start."""
        n = tokens.shape[1]
        inner = torch.ones(n, n, dtype=torch.bool, device=tokens.device)
        if causal:
            inner = torch.tril(inner)
        return self._forward(model, tokens, rows, positions, inner.expand(len(rows), -1, -1), store, runs)

    def forward_tentative(self, model, tokens: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor,
                          inner: torch.Tensor, runs: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of ``tokens`` (b, n) under the attention ``inner`` (b, n, n) among them (True = may
        attend; every token sees its row's cache); their keys/values are written after the cache
        and count only once :meth:`keep` says how many of them each row keeps. A draft-and-verify
        decode addresses every live row in each forward, so the rows not given have finished and are
        dropped (kept, every later forward would move and attend over them)."""
        logits = self._forward(model, tokens, rows, positions, inner, False, runs, drop_others=True)
        self.tentative = (len(rows), self.length, tokens.shape[1])
        return logits

    def keep(self, n_keep: torch.Tensor) -> None:
        """After :meth:`forward_tentative`: the first ``n_keep[i]`` tokens of cache row i count. Rows
        keep different numbers of tokens, so the cache advances by the most any row kept and the
        slots a row did not keep stay masked out for it (positions are the model's business: the
        nano models place tokens by their text, never by their slot)."""
        b, t, n = self.tentative
        slots = torch.arange(n, device=n_keep.device)
        self.key_mask[:b, t : t + n] = slots[None, :] < n_keep[:, None]
        self.length += int(n_keep.max()) if b else 0

    def _forward(self, model, tokens: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor, inner: torch.Tensor,
                 store: bool, runs: torch.Tensor | None, drop_others: bool = False) -> torch.Tensor:
        n, t, want = tokens.shape[1], self.length, rows.tolist()
        b = len(want)
        if (store or drop_others) and want != self.alive:
            self._select(want)  # a store (or a tentative forward) for fewer rows: the others stopped
        elif self.alive[:b] != want:  # a subset (rows whose block finished early sit out): to the front, once
            self._to_front(want)
        self._ensure(n)  # after a select: the fewer rows are the cheaper to grow
        # attend over the first b rows in place; keys/values of these tokens go to slots t..t+n
        bufs = [(k[:b], v[:b], t) for k, v in zip(self.k, self.v)]
        allowed = torch.cat([self.key_mask[:b, None, :t].expand(-1, n, -1), inner], dim=2)
        # additive mask, made once for all layers (a boolean one is converted inside every attention call)
        bias = torch.zeros(allowed.shape, dtype=self.k[0].dtype, device=tokens.device).masked_fill_(~allowed, float("-inf"))
        hidden, _ = model.run_layers(model.embed(tokens), positions, bias[:, None], bufs, runs)
        if store:  # the keys/values were written into slots t..t+n in place: make them count
            self.key_mask[:b, t : t + n] = True
            self.length += n
        return model.logits(hidden)
