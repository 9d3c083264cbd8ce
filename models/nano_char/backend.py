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
from models.nano.backend import TokenizedBackend
from models.nano.cache import BatchCache
from models.nano.model import count_m
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
    n_answer: torch.Tensor  # (B,) answer tokens stored per region: the next one sits at rotary position n_answer
    tentative: torch.Tensor | None = None  # after a spec_forward: the rows it ran for


class NanoCharBackend(TokenizedBackend):
    """One nano twin (``kind`` 'diffusion' or 'ar'); implements both decoder protocols."""

    batches_regions = True  # all lines of a page decode as one batch
    # its drafts are mostly all kept, so one block after the last draft (the narrowest forward) is
    # enough: faster than a block after every query in both regimes (docs/speculative.md)
    draft_branches = "last"

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
    def encode(self, page, regions: list[Region], block_length: int | None = None) -> NanoContext:
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
        best = self.model.ctc_head(enc).argmax(-1).cpu().tolist()
        paths = []
        for row, n in zip(best, enc_len.cpu().tolist()):
            path, prev = [], None
            for t, tok in enumerate(row[:n]):
                if tok != prev and tok != self.tok.pad_id:
                    path.append((tok, 4 * t + 2))
                prev = tok
            paths.append(path)
        return NanoContext(cache, logits, crops, paths, torch.zeros(len(crops), dtype=torch.long, device=self.device))

    def _positions(self, ctx: NanoContext, rows: torch.Tensor, n: int) -> torch.Tensor:
        """(b, n) rotary positions of n tokens after each row's stored answer (answer token k sits at k)."""
        return (ctx.n_answer[rows][:, None] + torch.arange(n, device=self.device)).float()

    def _forward(self, ctx: NanoContext, tokens: torch.Tensor, rows: torch.Tensor, store: bool, causal: bool):
        logits = ctx.cache.forward(self.model, tokens, rows, self._positions(ctx, rows, tokens.shape[1]), store, causal)
        if store:
            ctx.n_answer[rows] += tokens.shape[1]
        return logits

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
        parts, pos = [clean], [base + torch.arange(n, device=self.device)]
        if diffusion:
            ids, offsets = layout.after_clean(self.mask_id)
            parts.append(ids)
            pos.append(base + offsets)
        ctx.tentative = rows
        logits = ctx.cache.forward_tentative(self.model, torch.cat(parts, 1), rows, torch.cat(pos, 1).float(),
                                             layout.attention(with_queries=diffusion))
        if not diffusion:
            return SpecLogits(logits[:, layout.queries_from - 1 : n], logits[:, :0])
        return layout.split(logits[:, n:])

    def keep(self, ctx: NanoContext, rows: torch.Tensor, n_keep: torch.Tensor) -> None:
        ctx.cache.keep(n_keep)
        ctx.n_answer[ctx.tentative] += n_keep
        ctx.tentative = None

    # ---- boxes without ground truth ----------------------------------------------------------

    def token_boxes(self, page, region: Region, ctx: NanoContext, row: int, ids: list[int]):
        """Character boxes from the CTC head's greedy path (x positions of the glyphs it fires on)."""
        crop = ctx.crops[row]
        path = ctx.ctc_paths[row]
        texts = [self.tok.token_text(i) if i not in self.stop_ids else "" for i in ids]
        if not path:
            return None
        ctc_text = "".join(self.tok.token_text(t) for t, _ in path)
        xs = np.array([x for _, x in path], dtype=float)
        mapping = align.char_map("".join(texts), ctc_text)
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
