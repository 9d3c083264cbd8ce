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
import torch.nn.functional as F

from models.base import Backend
from models.nano.preprocess import LineCrop, collate, crop_line, ink_levels, reference_height, to_gray
from models.nano_char.model import NanoOCR, count_m
from models.nano_char.tokenizer import CharTokenizer
from models.nano_char.weights import load_model
from mudiff_viz.core import align
from mudiff_viz.core.types import Region
from mudiff_viz.inputs.regions import segment_lines


@dataclass
class NanoContext:
    """The batch's KV cache, kept compact: cache row i holds region ``alive[i]``.

    Rows that finish are dropped the next time the cache is written for the others, so the common
    case (every live row addressed) attends over plain slices: no gather, no concatenation.
    """

    k: list[torch.Tensor]  # per layer (B_alive, H, capacity, D)
    v: list[torch.Tensor]
    key_mask: torch.Tensor  # (B_alive, capacity) True where a key is real
    length: int  # filled positions (same for all rows)
    first_logits: torch.Tensor  # (B, V) from the prefill (<bos> position)
    crops: list[LineCrop]
    ctc_paths: list[list[tuple[int, int]]]  # per row: (token id, line-image x) of the CTC greedy path
    prompt_len: int = 0  # cache slots of [visual ; <bos>]; answer position k lives at slot prompt_len + k
    alive: list[int] | None = None  # region index of each cache row


class NanoCharBackend(Backend):
    """One nano twin (``kind`` 'diffusion' or 'ar'); implements both decoder protocols."""

    batches_regions = True  # all lines of a page decode as one batch

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

    def regions(self, page) -> list[Region]:
        """Text-layer lines when the page has them, else lines segmented from the pixels."""
        if page.lines:
            return [
                Region(bbox=ln.bbox, kind="line", gt_text=ln.text, gt_chars=[(c.c, c.bbox) for c in ln.chars])
                for ln in page.lines
            ]
        return [Region(bbox=b, kind="line") for b in segment_lines(to_gray(page.image))]

    # ---- protocol --------------------------------------------------------------------------------

    def token_text(self, token_id: int) -> str:
        return self.tok.token_text(token_id)

    def detokenize(self, ids) -> str:
        return self.tok.decode(ids)

    @torch.inference_mode()
    def encode(self, page, regions: list[Region], block_length: int | None = None) -> NanoContext:
        gray = to_gray(page.image)
        levels = ink_levels(gray)
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
        b, p1 = key_mask.shape
        capacity = p1 + 128
        ks, vs = [], []
        for k, v in kv:
            kk = k.new_zeros(b, k.shape[1], capacity, k.shape[3])
            vv = v.new_zeros(b, v.shape[1], capacity, v.shape[3])
            kk[:, :, :p1], vv[:, :, :p1] = k, v
            ks.append(kk)
            vs.append(vv)
        mask = torch.zeros(b, capacity, dtype=torch.bool, device=self.device)
        mask[:, :p1] = key_mask
        best = self.model.ctc_head(enc).argmax(-1).cpu().tolist()
        paths = []
        for row, n in zip(best, enc_len.cpu().tolist()):
            path, prev = [], None
            for t, tok in enumerate(row[:n]):
                if tok != prev and tok != self.tok.pad_id:
                    path.append((tok, 4 * t + 2))
                prev = tok
            paths.append(path)
        return NanoContext(ks, vs, mask, p1, logits, crops, paths, prompt_len=p1, alive=list(range(b)))

    def _ensure(self, ctx: NanoContext, extra: int) -> None:
        cap = ctx.key_mask.shape[1]
        if ctx.length + extra <= cap:
            return
        grow = max(extra, cap)
        ctx.k = [F.pad(k, (0, 0, 0, grow)) for k in ctx.k]
        ctx.v = [F.pad(v, (0, 0, 0, grow)) for v in ctx.v]
        ctx.key_mask = F.pad(ctx.key_mask, (0, grow))

    @staticmethod
    def _compact(ctx: NanoContext, rows: list[int]) -> None:
        """Keep only the cache rows of ``rows`` (the others have finished for good)."""
        keep = torch.tensor([ctx.alive.index(r) for r in rows], device=ctx.key_mask.device)
        ctx.k = [k.index_select(0, keep) for k in ctx.k]
        ctx.v = [v.index_select(0, keep) for v in ctx.v]
        ctx.key_mask = ctx.key_mask.index_select(0, keep)
        ctx.alive = list(rows)

    def _forward(self, ctx: NanoContext, tokens: torch.Tensor, rows: torch.Tensor, store: bool, causal: bool):
        n = tokens.shape[1]
        t = ctx.length
        want = rows.tolist()
        self._ensure(ctx, n)
        if store and want != ctx.alive:
            self._compact(ctx, want)  # a store for fewer rows: the others stopped
        if want == ctx.alive:  # every live row: attend over the cache in place
            bufs = [(k, v, t) for k, v in zip(ctx.k, ctx.v)]
            key_mask = ctx.key_mask[:, :t]
        else:  # a subset (rows whose block finished early sit out): gather them once
            idx = torch.tensor([ctx.alive.index(r) for r in want], device=self.device)
            bufs = [(k.index_select(0, idx)[:, :, : t + n], v.index_select(0, idx)[:, :, : t + n], t)
                    for k, v in zip(ctx.k, ctx.v)]
            key_mask = ctx.key_mask.index_select(0, idx)[:, :t]
        inner = torch.ones(n, n, dtype=torch.bool, device=self.device)
        if causal:
            inner = torch.tril(inner)
        mask = torch.cat([key_mask[:, None, :].expand(-1, n, -1), inner.expand(len(want), -1, -1)], dim=2)
        positions = torch.arange(t - ctx.prompt_len, t - ctx.prompt_len + n, device=self.device, dtype=torch.float32)
        hidden, _ = self.model.run_layers(self.model.embed(tokens), positions, mask[:, None], bufs)
        if store:  # the keys/values were written into slots t..t+n in place: make them count
            ctx.key_mask[:, t : t + n] = True
            ctx.length += n
        return self.model.logits(hidden)

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
