"""The nano twins behind the backend protocol: all text lines of a page decode as one batch.

Regions are the text-layer lines of a PDF, or lines segmented from the pixels of an image. The KV
cache holds every row at the same length (visual tokens are left-padded, blocks advance in
lockstep), so a finished row simply stops being addressed by ``rows``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from models.base import SpecLayout, SpecLogits
from models.nano.anchor import ANCHOR_REACH, anchored_column
from models.nano.backend import TokenizedBackend
from models.nano.cache import BatchCache
from models.nano.model import count_m, greedy_ctc_paths
from models.nano.preprocess import LineCrop, collate, crop_line, reference_height
from models.nano.tokenizer import CharTokenizer
from models.nano_char.model import NanoOCR
from models.nano_char.weights import load_model
from mudiff_viz.core import align
from mudiff_viz.core.types import Region, RegionUnit


@dataclass
class NanoContext:
    cache: BatchCache
    first_logits: torch.Tensor  # (B, V) from the prefill (<bos> position)
    crops: list[LineCrop]
    ctc_paths: list[list[tuple[int, int]]]  # per row: (token id, line-image x) of the CTC greedy path
    n_answer: torch.Tensor  # (B,) answer tokens stored per region: the next one sits at rotary position n_answer + shift
    shift: torch.Tensor  # (B,) how far glyph anchoring moved each row's next position (models/nano/anchor.py)
    ctc_lines: list[str]  # per row: the CTC head's reading of its line
    texts: list[str]  # per row: its committed text
    tentative: tuple | None = None  # after a spec_forward: (rows, shift after each clean prefix, clean tokens)
    anchor_reach: int = ANCHOR_REACH  # this decode's glyph anchoring reach (0: count characters only)


class NanoCharBackend(TokenizedBackend):
    """One nano twin (``kind`` 'diffusion' or 'ar'); implements both decoder protocols."""

    batches_regions = True  # all lines of a page decode as one batch
    # its drafts are mostly all kept, so one block after the last draft (the narrowest forward) is
    # enough: faster than a block after every query in both regimes (docs/speculative.md)
    draft_branches = "last"
    anchor_reach = ANCHOR_REACH  # its own glyph anchoring reach; a decode may ask for another (encode's anchor_reach)

    def __init__(self, model_dir: str | Path, device: str = "cpu", spec: str | None = None) -> None:
        self.model: NanoOCR = load_model(Path(model_dir)).to(device)
        self.cfg = self.model.cfg
        self.kind = self.cfg.kind
        self.tok = CharTokenizer()
        self.device = torch.device(device)
        self.name = f"nano-char-{self.kind}"
        self.spec = spec or str(model_dir)
        self.params_m = count_m(self.model)
        self.mask_id = self.tok.mask_id
        self.stop_ids = frozenset({self.tok.eos_id})
        self.max_answer = self.cfg.max_answer

    # ---- regions ---------------------------------------------------------------------------------

    region_unit = RegionUnit("line")  # text lines, found by mudiff_viz.inputs.regions

    # ---- protocol --------------------------------------------------------------------------------

    @torch.inference_mode()
    def encode(self, page, regions: list[Region], block_length: int | None = None,
               anchor_reach: int | None = None) -> NanoContext:
        """``anchor_reach``: glyph anchoring of this decode (None: the backend's own)."""
        gray, levels = self.page_gray(page)
        boxes = [r.bbox for r in regions]
        ref = reference_height(gray, boxes, levels)
        crops = [crop_line(gray, b, levels, ref) for b in boxes]
        if not crops:
            raise ValueError("no text lines found on the page")
        images, widths = collate([c.pixels for c in crops])
        dtype = next(self.model.parameters()).dtype
        images, widths = images.to(self.device, dtype), widths.to(self.device)
        visual = self.model.encode(images, widths)
        enc, enc_len = visual.enc, visual.enc_len
        logits, kv, key_mask = self.model.prefill(visual, self.tok.bos_id)
        cache = BatchCache.from_prefill(kv, key_mask)
        paths = greedy_ctc_paths(self.model.ctc_head(enc), enc_len, self.tok.pad_id)
        zero = torch.zeros(len(crops), dtype=torch.long, device=self.device)
        ctc_lines = ["".join(self.tok.token_text(t) for t, _ in path) for path in paths]
        return NanoContext(cache, logits, crops, paths, zero, zero.clone(), ctc_lines, [""] * len(crops),
                           anchor_reach=self.anchor_reach if anchor_reach is None else anchor_reach)

    def _positions(self, ctx: NanoContext, rows: torch.Tensor, n: int) -> torch.Tensor:
        """(b, n) rotary positions of n tokens after each row's stored answer (answer token k sits at
        k, moved by the row's anchoring shift)."""
        return ((ctx.n_answer + ctx.shift)[rows][:, None] + torch.arange(n, device=self.device)).float()

    def _anchored_shift(self, ctx: NanoContext, row: int, text: str, n_answer: int, shift: int) -> int:
        """The shift after ``text`` (the row's committed text, ``n_answer`` tokens) that puts the next
        token on the glyph the CTC head reads next."""
        column = n_answer + shift
        return anchored_column(text, ctx.ctc_lines[row], column, ctx.anchor_reach) - n_answer

    def _forward(self, ctx: NanoContext, tokens: torch.Tensor, rows: torch.Tensor, store: bool, causal: bool):
        logits = ctx.cache.forward(self.model, tokens, rows, self._positions(ctx, rows, tokens.shape[1]), store, causal)
        if store:
            ctx.n_answer[rows] += tokens.shape[1]
            for r, ids in zip(rows.tolist(), tokens.tolist()):
                ctx.texts[r] += self.tok.decode(ids)
                if ctx.anchor_reach:
                    ctx.shift[r] = self._anchored_shift(ctx, r, ctx.texts[r], int(ctx.n_answer[r]), int(ctx.shift[r]))
        return logits

    def _clean_shifts(self, ctx: NanoContext, rows: torch.Tensor, clean: torch.Tensor, n_clean: torch.Tensor) -> torch.Tensor:
        """(b, n + 1): each row's anchoring shift after clean[:j], j = 0..n, as one-at-a-time commits
        of those tokens would leave it."""
        shift0 = ctx.shift[rows]
        n = clean.shape[1]
        if not ctx.anchor_reach or n == 0:
            return shift0[:, None].expand(-1, n + 1)
        out = []
        for i, (r, ids, k) in enumerate(zip(rows.tolist(), clean.tolist(), n_clean.tolist())):
            text, stored, shift = ctx.texts[r], int(ctx.n_answer[r]), int(shift0[i])
            row = [shift]
            for j in range(n):
                if j < k:
                    text += self.tok.decode([ids[j]])
                    shift = self._anchored_shift(ctx, r, text, stored + j + 1, shift)
                row.append(shift)
            out.append(row)
        return torch.tensor(out, dtype=torch.long, device=self.device)

    # diffusion
    def block_logits(self, ctx: NanoContext, block: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return self._forward(ctx, block, rows, store=False, causal=False)

    def commit_block(self, ctx: NanoContext, block: torch.Tensor, rows: torch.Tensor) -> None:
        self._forward(ctx, block, rows, store=True, causal=False)

    # autoregressive
    def first_logits(self, ctx: NanoContext) -> torch.Tensor:
        return ctx.first_logits

    def next_logits(self, ctx: NanoContext, tokens: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return self._forward(ctx, tokens[:, None], rows, store=True, causal=True)[:, 0]

    # draft and verify
    def spec_forward(self, ctx: NanoContext, rows: torch.Tensor, layout: SpecLayout) -> SpecLogits:
        """One forward of [clean ; verify queries ; drafts] (models/base.py: SpecLayout). Answer token k
        sits at rotary position k whether masked or known, so the query after ``clean[:j]`` is a MASK
        at clean token j's position (the diffusion twin) or the clean token before it (the AR twin)."""
        clean, n = layout.clean, layout.clean.shape[1]
        diffusion = self.kind == "diffusion"
        if not diffusion and (layout.n_drafts or layout.queries_from < 1):
            raise ValueError("an AR model verifies after clean tokens only; it cannot draft")
        base = ctx.n_answer[rows][:, None]
        shifts = self._clean_shifts(ctx, rows, clean, layout.n_clean)
        parts, pos = [clean], [base + torch.arange(n, device=self.device) + shifts[:, :n]]
        if diffusion:
            ids, offsets = layout.after_clean(self.mask_id)
            parts.append(ids)
            pos.append(base + offsets + shifts.gather(1, layout.after_clean_prefix()))
        ctx.tentative = (rows, shifts, clean)
        logits = ctx.cache.forward_tentative(self.model, torch.cat(parts, 1), rows, torch.cat(pos, 1).float(),
                                             layout.attention(with_queries=diffusion))
        if not diffusion:
            return SpecLogits(logits[:, layout.queries_from - 1 : n], logits[:, :0])
        return layout.split(logits[:, n:])

    def keep(self, ctx: NanoContext, rows: torch.Tensor, n_keep: torch.Tensor) -> None:
        kept_rows, shifts, clean = ctx.tentative
        ctx.cache.keep(n_keep)
        ctx.n_answer[kept_rows] += n_keep
        ctx.shift[kept_rows] = shifts.gather(1, n_keep[:, None])[:, 0]
        for r, ids, k in zip(kept_rows.tolist(), clean.tolist(), n_keep.tolist()):
            ctx.texts[r] += self.tok.decode(ids[:k])
        ctx.tentative = None

    # ---- boxes without ground truth ----------------------------------------------------------

    def token_boxes(self, page, region: Region, ctx: NanoContext, row: int, ids: list[int]):
        """Character boxes from the CTC head's greedy path (x positions of the glyphs it fires on)."""
        crop = ctx.crops[row]
        path = ctx.ctc_paths[row]
        texts = [self.tok.token_text(i) if i not in self.stop_ids else "" for i in ids]
        if not path:
            return None
        xs = np.array([x for _, x in path], dtype=float)
        mapping = align.char_map("".join(texts), ctx.ctc_lines[row])
        known = [(k, xs[m]) for k, m in enumerate(mapping) if m is not None]
        if not known:
            return None
        ks, kx = np.array([k for k, _ in known], float), np.array([x for _, x in known], float)
        centers = np.interp(np.arange(len(mapping)), ks, kx)
        half = np.diff(centers, prepend=centers[0] - 8, append=centers[-1] + 8) / 2 if len(centers) else []
        boxes: list = []
        pos = 0
        for tok in texts:
            if not tok:
                boxes.append(None)
                continue
            c0 = centers[pos] - max(2.0, half[pos])
            c1 = centers[pos + len(tok) - 1] + max(2.0, half[pos + len(tok)])
            boxes.append(crop.page_box(max(0.0, c0), c1))
            pos += len(tok)
        return boxes
