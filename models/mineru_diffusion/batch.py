"""Several regions of a page through MinerU-Diffusion as one batch, each row as it runs alone.

Regions have their own image sizes, so their prompts have their own lengths. Prompts are
*left*-padded to the longest one: every row's prompt ends at the same cache slot, the generated
blocks then advance in lockstep (one shared slot count, as in the nano backends'
models/nano/cache.py), and a key mask per row hides its padding slots. Each row keeps its own
positions: a token at slot ``s`` of a row padded by ``pad`` sits at position ``s - pad``, which is
where it sits when the region decodes alone. The prompt's block-causal mask (``sdar_mask``) is cut
into blocks from the END of the prompt, so in slot coordinates every row has the same blocks; the
padding only adds keys no query sees. So each row computes what it computes alone (up to float
rounding of the different shapes: the parity tests check token for token).

Rows that finish drop out: a commit for fewer rows than the cache holds drops the others; a
denoising forward for a subset of rows (rows whose block is done sit out) first moves those rows
to the front of the cache, once, and attends over that slice. Cache row i holds region ``alive[i]``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from models.mineru_diffusion.model import sdar_mask


class BatchKVCache:
    """Per-layer keys/values (rows, kv heads, slots, head dim) for a batch of left-padded rows."""

    def __init__(self, n_layers: int, pads: list[int], device: torch.device, rope_in_dtype: bool = False) -> None:
        self.rope_in_dtype = rope_in_dtype  # RoPE in the model dtype (numerics "release"; model.py: KVCache)
        self.k: list[torch.Tensor | None] = [None] * n_layers
        self.v: list[torch.Tensor | None] = [None] * n_layers
        self.pad = torch.tensor(pads, dtype=torch.long, device=device)  # (rows,) left padding per cache row
        self.real = torch.zeros(len(pads), 0, dtype=torch.bool, device=device)  # (rows, capacity) real keys
        self.length = 0  # filled slots, the same for every row
        self.alive = list(range(len(pads)))  # region index of each cache row
        self.rows = len(pads)  # rows in the forward being run: the first ``rows`` cache rows

    # ---- what the decoder layers call (models/mineru_diffusion/model.py: Attention) ------------

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write this chunk after the filled slots of the forward's rows; return their keys/values so far."""
        b, end = k.shape[0], self.length + k.shape[2]
        if self.k[layer] is None:
            self.k[layer] = k.new_zeros(len(self.alive), k.shape[1], self.capacity, k.shape[3])
            self.v[layer] = v.new_zeros(self.k[layer].shape)
        self.k[layer][:b, :, self.length : end] = k
        self.v[layer][:b, :, self.length : end] = v
        return self.k[layer][:b, :, :end], self.v[layer][:b, :, :end]

    def advance(self, n: int) -> None:
        """The chunk just forwarded stays: its slots become real keys of the forward's rows."""
        self.real[: self.rows, self.length : self.length + n] = True
        self.length += n

    # ---- row bookkeeping --------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        return self.real.shape[1]

    def prepare(self, rows: list[int], n: int, store: bool) -> None:
        """Make room for ``n`` more slots and put ``rows`` (region indices) first, in that order. A
        store for fewer rows than the cache holds drops the others (they finished)."""
        if self.length + n > self.capacity:
            grow = max(n, self.capacity, 64)
            self.k = [None if k is None else F.pad(k, (0, 0, 0, grow)) for k in self.k]
            self.v = [None if v is None else F.pad(v, (0, 0, 0, grow)) for v in self.v]
            self.real = F.pad(self.real, (0, grow))
        if store and rows != self.alive:
            self._select(rows)
        elif self.alive[: len(rows)] != rows:
            self._select(rows + [r for r in self.alive if r not in rows])
        self.rows = len(rows)

    def _select(self, rows: list[int]) -> None:
        keep = torch.tensor([self.alive.index(r) for r in rows], device=self.real.device)
        self.k = [None if k is None else k.index_select(0, keep) for k in self.k]
        self.v = [None if v is None else v.index_select(0, keep) for v in self.v]
        self.real, self.pad = self.real.index_select(0, keep), self.pad.index_select(0, keep)
        self.alive = list(rows)

    def block_positions(self, n: int) -> torch.Tensor:
        """(rows, n) positions of the next ``n`` slots for the forward's rows (each row's own)."""
        start = self.length - self.pad[: self.rows]
        return start[:, None] + torch.arange(n, device=self.real.device)[None, :]

    def block_mask(self, n: int) -> torch.Tensor:
        """(rows, 1, n, length + n): a block sees its row's real keys and the whole block."""
        b = self.rows
        seen = self.real[:b, None, : self.length].expand(b, n, self.length)
        return torch.cat([seen, torch.ones(b, n, n, dtype=torch.bool, device=self.real.device)], 2)[:, None]


def batch_prefill(model, embeds: list[torch.Tensor], block_length: int, rope_in_dtype: bool = False) -> BatchKVCache:
    """Block-causal prefill of several prompts ((1, P_i, H) each), left-padded into one cache."""
    longest = max(x.shape[1] for x in embeds)
    dev = embeds[0].device
    pads = [longest - x.shape[1] for x in embeds]
    cache = BatchKVCache(len(model.decoder.layers), pads, dev, rope_in_dtype)
    cache.prepare(list(range(len(embeds))), longest, store=False)
    x = torch.cat([F.pad(e, (0, 0, p, 0)) for e, p in zip(embeds, pads)])  # (B, longest, H), zeros in front
    slots = torch.arange(longest, device=dev)
    real = slots[None, :] >= cache.pad[:, None]  # (B, longest)
    positions = (slots[None, :] - cache.pad[:, None]).clamp(min=0)
    allowed = sdar_mask(longest, 0, block_length, device=dev)[None] & real[:, None, :]
    allowed |= torch.eye(longest, dtype=torch.bool, device=dev)  # a padding query sees itself (no empty row)
    model.decoder(x, positions, cache, allowed[:, None], store=True)
    cache.real[:, :longest] = real
    return cache


def batch_block_forward(model, cache: BatchKVCache, block_ids: torch.Tensor, rows: list[int],
                        store: bool) -> torch.Tensor | None:
    """Logits (b, L, V) of a block per row in ``rows``; ``store=True`` commits it (no lm_head)."""
    n = block_ids.shape[1]
    cache.prepare(rows, n, store)
    hidden = model.decoder(model.embed(block_ids), cache.block_positions(n), cache, cache.block_mask(n), store)
    return None if store else model.logits(hidden)
