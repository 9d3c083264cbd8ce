"""The nano twins (subword pair) behind the backend protocol: all text blocks of a page decode as
one batch.

Regions are text blocks: the text-layer lines of a PDF, or lines segmented from the pixels of an
image, grouped into blocks of at most ``max_lines`` lines (mudiff_viz.inputs.regions.find_regions). Each
line is encoded on its own and the lines' visual tokens are concatenated in reading order. The KV
cache holds every row at the same length (visual tokens are left-padded, blocks advance in
lockstep), so a finished row simply stops being addressed by ``rows``. The backend keeps each
row's reading position (line, column after its committed text), from which the answer's rotary
positions follow (models/nano/model.py), and, after every commit, moves the column back onto the
glyphs the CTC head reads (models/nano/anchor.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from models.base import Backend, SpecLayout, SpecLogits, fingerprint
from models.nano.anchor import ANCHOR_REACH, anchored_column, anchored_walk
from models.nano.cache import BatchCache
from models.nano.model import CharTables, NanoOCR, answer_position, count_m, greedy_ctc_paths, masked_runs, walk
from models.nano.preprocess import LineCrop, collate, crop_line, ink_levels, reference_height, to_gray
from models.nano.tokenizer import CharTokenizer, SubwordTokenizer
from models.nano.weights import load_model
from mudiff_viz.core import align
from mudiff_viz.core.types import Region, RegionUnit, union

CHARS = CharTokenizer()


@dataclass
class NanoContext:
    cache: BatchCache
    first_logits: torch.Tensor  # (B, V) from the prefill (<|im_start|> position)
    crops: list[list[LineCrop]]  # per region, its lines
    ctc_paths: list[list[list[tuple[int, int]]]]  # per region, per line: (char id, line-image x) of the CTC path
    line_starts: torch.Tensor  # (B, max_lines + 1) start of each line on the position axis
    line: torch.Tensor  # (B,) reading position after each region's committed text: line ...
    col: torch.Tensor  # (B,) ... and column
    ctc_lines: list[list[str]]  # per region, per line: the CTC head's reading (what the column anchors on)
    texts: list[str]  # per region: its committed text
    tentative: tuple | None = None  # after a spec_forward: (rows, line, col after each clean prefix, clean tokens)
    anchor_reach: int = ANCHOR_REACH  # this decode's glyph anchoring reach (0: count characters only)


class TokenizedBackend(Backend):
    """A backend whose ``tok`` (a nano tokenizer) answers the token-text questions."""

    tok: SubwordTokenizer | CharTokenizer

    def token_text(self, token_id: int) -> str:
        return self.tok.token_text(token_id)

    def detokenize(self, ids) -> str:
        return self.tok.decode(ids)

    def vocabulary(self) -> str:
        return fingerprint(self.tok.token_text(i) for i in range(self.tok.vocab_size))

    _gray: tuple = (None, None, None)  # the last page image, its grey pixels and ink levels

    def page_gray(self, page) -> tuple[np.ndarray, tuple[float, float]]:
        """The page's grey pixels and (paper, ink) levels, kept for the last page image: a decode of
        one region at a time encodes every region of the same page, and converting the whole page
        each time cost ~3% of such a decode. One tuple, swapped whole, so threads sharing the
        backend never see half an entry."""
        image, gray, levels = self._gray
        if image is not page.image:
            gray = to_gray(page.image)
            levels = ink_levels(gray)
            self._gray = (page.image, gray, levels)
        return gray, levels


class NanoBackend(TokenizedBackend):
    """One nano twin (``kind`` 'diffusion' or 'ar'); implements both decoder protocols."""

    batches_regions = True  # all text blocks of a page decode as one batch
    # its forward of many tokens is dear (a 2,048-id vocabulary at every position) and its drafts are
    # kept less often than the character pair's: 4 was fastest on both draft-and-verify decoders
    draft_length = 4
    anchor_reach = ANCHOR_REACH  # its own glyph anchoring reach; a decode may ask for another (encode's anchor_reach)

    def __init__(self, model_dir: str | Path, device: str = "cpu", spec: str | None = None) -> None:
        model, self.tok = load_model(Path(model_dir))
        self.model: NanoOCR = model.to(device)
        self.cfg = self.model.cfg
        self.kind = self.cfg.kind
        self.device = torch.device(device)
        self.name = f"nano-subword-{self.kind}"  # the pair as the model picker names it (nano-char-* for the other)
        self.spec = spec or str(model_dir)
        self.params_m = count_m(self.model)
        self.mask_id = self.tok.mask_id
        self.stop_ids = self.tok.stop_ids
        self.max_answer = self.cfg.max_answer
        self.tables = CharTables.of(self.tok).to(self.device)
        self.pieces = self.tok.pieces  # text each id writes
        self._table_rows = tuple(t.tolist() for t in (self.tables.length, self.tables.newlines, self.tables.tail))

    # ---- regions ---------------------------------------------------------------------------------

    @property
    def region_unit(self) -> RegionUnit:
        """Text blocks of at most ``max_lines`` lines (found by mudiff_viz.inputs.regions)."""
        return RegionUnit("block", self.cfg.max_lines)

    # ---- protocol --------------------------------------------------------------------------------

    @torch.inference_mode()
    def encode(self, page, regions: list[Region], block_length: int | None = None,
               anchor_reach: int | None = None) -> NanoContext:
        """``anchor_reach``: glyph anchoring of this decode (None: the backend's own)."""
        gray, levels = self.page_gray(page)
        line_boxes = [r.meta.get("lines") or [r.bbox] for r in regions]
        ref = reference_height(gray, [b for boxes in line_boxes for b in boxes], levels)
        crops = [[crop_line(gray, b, levels, ref) for b in boxes] for boxes in line_boxes]
        flat = [c for cs in crops for c in cs]
        if not flat:
            raise ValueError("no text lines found on the page")
        images, widths = collate([c.pixels for c in flat])
        dtype = next(self.model.parameters()).dtype
        images, widths = images.to(self.device, dtype), widths.to(self.device)
        visual = self.model.encode(images, widths, [len(cs) for cs in crops])
        logits, kv, key_mask = self.model.prefill(visual, self.tok.image_pad_id, self.tok.bos_id)
        cache = BatchCache.from_prefill(kv, key_mask)
        paths = greedy_ctc_paths(self.model.ctc_head(visual.enc), visual.enc_len, CHARS.pad_id)
        per_region, first = [], 0
        for cs in crops:
            per_region.append(paths[first : first + len(cs)])
            first += len(cs)
        zero = torch.zeros(len(regions), device=self.device)
        ctc_lines = [["".join(CHARS.token_text(t) for t, _ in path) for path in lines] for lines in per_region]
        return NanoContext(cache, logits, crops, per_region, visual.line_starts, zero, zero.clone(), ctc_lines,
                           [""] * len(regions), anchor_reach=self.anchor_reach if anchor_reach is None else anchor_reach)

    def _walk(self, ctx: NanoContext, tokens: torch.Tensor, rows: torch.Tensor, known: torch.Tensor):
        return walk(ctx.line[rows], ctx.col[rows], tokens, known, self.tables, self.cfg.chars_per_token)

    @staticmethod
    def _anchor(ctc_lines: list[str], text: str, col: float, reach: int) -> float:
        """The column after ``text`` (a region's committed text), moved onto the glyphs of its line."""
        line_text = text.rpartition("\n")[2]
        k = text.count("\n")
        if not reach or k >= len(ctc_lines):
            return col
        return float(anchored_column(line_text, ctc_lines[k], int(col), reach))

    def _commit_text(self, ctx: NanoContext, rows: torch.Tensor, tokens: torch.Tensor) -> None:
        """Append committed tokens to the rows' texts and anchor their columns."""
        for r, ids in zip(rows.tolist(), tokens.tolist()):
            ctx.texts[r] += "".join(self.pieces[t] for t in ids)
            ctx.col[r] = self._anchor(ctx.ctc_lines[r], ctx.texts[r], float(ctx.col[r]), ctx.anchor_reach)

    def _store(self, ctx: NanoContext, tokens: torch.Tensor, rows: torch.Tensor, causal: bool) -> torch.Tensor:
        """Forward known tokens, store them, and move the rows' reading positions past them."""
        _, _, line, col = self._walk(ctx, tokens, rows, torch.ones_like(tokens, dtype=torch.bool))
        logits = ctx.cache.forward(self.model, tokens, rows, answer_position(ctx.line_starts[rows], line, col), True, causal)
        ctx.line[rows], ctx.col[rows] = line[:, -1], col[:, -1]
        self._commit_text(ctx, rows, tokens)
        return logits

    def _clean_walk(self, ctx: NanoContext, rows: torch.Tensor, clean: torch.Tensor, real: torch.Tensor):
        """Reading positions along each row's clean tokens as one-at-a-time commits leave them:
        (line, col) after each token, where it sits, and (line, col) after each prefix clean[:j],
        j = 0..n, anchored as a commit of clean[:j] would anchor it."""
        line0, col0 = ctx.line[rows], ctx.col[rows]
        if not ctx.anchor_reach:
            _, _, line_a, col_a = walk(line0, col0, clean, torch.ones_like(real), self.tables, self.cfg.chars_per_token, ~real)
            return line_a, col_a, torch.cat([line0[:, None], line_a], 1), torch.cat([col0[:, None], col_a], 1)
        ids, ok = clean.tolist(), real.tolist()
        walks = [anchored_walk(int(line), col, ctx.texts[r], ids[i], ok[i], self.pieces, *self._table_rows,
                               ctx.ctc_lines[r], ctx.anchor_reach)
                 for i, (r, line, col) in enumerate(zip(rows.tolist(), line0.tolist(), col0.tolist()))]
        as_tensor = lambda k: torch.tensor([w[k] for w in walks], dtype=col0.dtype, device=self.device).reshape(len(walks), clean.shape[1])
        line_a, col_a, col_after = as_tensor(0), as_tensor(1), as_tensor(2)
        return line_a, col_a, torch.cat([line0[:, None], line_a], 1), torch.cat([col0[:, None], col_after], 1)

    # diffusion
    def block_logits(self, ctx: NanoContext, block: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        masked = block == self.mask_id
        line, col, _, _ = self._walk(ctx, block, rows, ~masked)
        logits = ctx.cache.forward(self.model, block, rows, answer_position(ctx.line_starts[rows], line, col), False, False,
                                   masked_runs(masked))
        return self.model.scale_block_logits(logits, masked)

    def commit_block(self, ctx: NanoContext, block: torch.Tensor, rows: torch.Tensor) -> None:
        self._store(ctx, block, rows, causal=False)

    # autoregressive
    def first_logits(self, ctx: NanoContext) -> torch.Tensor:
        return ctx.first_logits

    def next_logits(self, ctx: NanoContext, tokens: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return self._store(ctx, tokens[:, None], rows, causal=True)[:, 0]

    # draft and verify
    def spec_forward(self, ctx: NanoContext, rows: torch.Tensor, layout: SpecLayout) -> SpecLogits:
        """One forward of [clean ; verify queries ; drafts] (models/base.py: SpecLayout). Clean tokens
        sit where a stored token sits (on its last character, as ``commit_block`` and ``next_logits``
        place it); a verify query where a block of one MASK after that prefix sits (the diffusion
        twin), or is the clean token itself (the AR twin); drafts as a block of masks after the row's
        clean text. So each query's logits are those of the one-token-at-a-time decode."""
        clean, n = layout.clean, layout.clean.shape[1]
        b = clean.shape[0]
        real = torch.arange(n, device=self.device)[None, :] < layout.n_clean[:, None]
        line_a, col_a, line_p, col_p = self._clean_walk(ctx, rows, clean, real)  # line_p, col_p: after clean[:j], j = 0..n
        starts = ctx.line_starts[rows]
        ctx.tentative = (rows, line_p, col_p, clean)
        parts, pos, runs = [clean], [answer_position(starts, line_a, col_a)], [torch.zeros_like(clean)]
        diffusion = self.kind == "diffusion"
        if diffusion:
            j = layout.query_prefix()
            parts.append(torch.full((b, len(j)), self.mask_id, dtype=torch.long, device=self.device))
            pos.append(answer_position(starts, line_p[:, j], col_p[:, j]))
            runs.append(torch.zeros_like(parts[-1]))
        elif layout.n_drafts or layout.queries_from < 1:
            raise ValueError("an AR model verifies after clean tokens only; it cannot draft")
        w = layout.n_drafts
        if w:
            if layout.branched:  # a block after each query, the query its first mask
                j = layout.query_prefix()
                first = 1
                line_s, col_s = line_p[:, j].reshape(-1), col_p[:, j].reshape(-1)
            else:  # one block after each row's clean text
                end = layout.n_clean[:, None]
                first = 0
                line_s, col_s = line_p.gather(1, end)[:, 0], col_p.gather(1, end)[:, 0]
            masks = torch.full((len(line_s), first + w), self.mask_id, dtype=torch.long, device=self.device)
            unknown = torch.zeros_like(masks, dtype=torch.bool)
            dl, dc, _, _ = walk(line_s, col_s, masks, unknown, self.tables, self.cfg.chars_per_token)
            blocks = len(line_s) // b
            dstarts = starts.repeat_interleave(blocks, 0)
            parts.append(masks[:, first:].reshape(b, -1))
            pos.append(answer_position(dstarts, dl, dc)[:, first:].reshape(b, -1))
            runs.append(masked_runs(~unknown)[:, first:].reshape(b, -1))
        m = layout.n_anchored
        if m:  # [anchor ; masks] after each of the first m queries' prefixes: a block whose first token is known
            j = layout.query_prefix()[:m]
            block = torch.full((b, m, 1 + w), self.mask_id, dtype=torch.long, device=self.device)
            block[:, :, 0] = layout.anchors
            block = block.reshape(b * m, 1 + w)
            known = block != self.mask_id
            al, ac, _, _ = walk(line_p[:, j].reshape(-1), col_p[:, j].reshape(-1), block, known, self.tables,
                                self.cfg.chars_per_token)
            parts.append(block.reshape(b, -1))
            pos.append(answer_position(starts.repeat_interleave(m, 0), al, ac).reshape(b, -1))
            runs.append(masked_runs(~known).reshape(b, -1))
        logits = ctx.cache.forward_tentative(self.model, torch.cat(parts, 1), rows, torch.cat(pos, 1),
                                             layout.attention(with_queries=diffusion), torch.cat(runs, 1))
        if not diffusion:
            return SpecLogits(logits[:, layout.queries_from - 1 : n], logits[:, :0])
        out = layout.split(logits[:, n:])
        nq, vocab = layout.n_queries, logits.shape[-1]
        one = torch.ones(b * nq, 1, dtype=torch.bool, device=self.device)  # each query: a block of one MASK
        verify = self.model.scale_block_logits(out.verify.reshape(b * nq, 1, vocab), one).view(out.verify.shape)
        draft, anchored = out.draft, out.anchored
        if w and self.cfg.count_scales:  # each draft scaled by the masks before it in its block
            blocks = draft.reshape(-1, w, vocab)
            if layout.branched:  # the query is the block's first mask
                blocks = torch.cat([torch.zeros_like(blocks[:, :1]), blocks], 1)
            masked = torch.ones(blocks.shape[:2], dtype=torch.bool, device=self.device)
            draft = self.model.scale_block_logits(blocks, masked)[:, layout.branched:].reshape(draft.shape)
            if m:  # after a known anchor, mask i has i masks before it, as in a block of masks alone
                flat = anchored.reshape(-1, w, vocab)
                masked = torch.ones(flat.shape[:2], dtype=torch.bool, device=self.device)
                anchored = self.model.scale_block_logits(flat, masked).view(anchored.shape)
        return SpecLogits(verify, draft, anchored)

    def keep(self, ctx: NanoContext, rows: torch.Tensor, n_keep: torch.Tensor) -> None:
        kept_rows, line_p, col_p, clean = ctx.tentative
        ctx.cache.keep(n_keep)
        ctx.line[kept_rows] = line_p.gather(1, n_keep[:, None])[:, 0]
        ctx.col[kept_rows] = col_p.gather(1, n_keep[:, None])[:, 0]  # anchored already
        for r, ids, k in zip(kept_rows.tolist(), clean.tolist(), n_keep.tolist()):
            ctx.texts[r] += "".join(self.pieces[t] for t in ids[:k])
        ctx.tentative = None

    # ---- boxes without ground truth ----------------------------------------------------------

    def token_boxes(self, page, region: Region, ctx: NanoContext, row: int, ids: list[int]):
        """Boxes from the CTC head's greedy path on each line (x positions of the glyphs it fires
        on); the decoded text's n-th line maps to the region's n-th line image."""
        crops, paths, readings = ctx.crops[row], ctx.ctc_paths[row], ctx.ctc_lines[row]
        texts = [self.tok.token_text(i) if i not in self.stop_ids else "" for i in ids]
        text = "".join(texts)
        char_boxes: list = []
        for li, line_text in enumerate(text.split("\n")):
            k = min(li, len(crops) - 1)
            char_boxes.extend(_line_char_boxes(line_text, crops[k], paths[k], readings[k]))
            char_boxes.append(None)  # the newline
        boxes, pos = [], 0
        for tok in texts:
            own = [b for b in char_boxes[pos : pos + len(tok)] if b is not None]
            pos += len(tok)
            same_line = [b for b in own if own and abs(b[1] - own[0][1]) < 1.0]
            boxes.append(union(same_line) if same_line else None)
        return boxes


def _line_char_boxes(text: str, crop: LineCrop, path: list[tuple[int, int]], ctc_text: str) -> list:
    """Per character of ``text``, its page box on ``crop`` from the CTC path (interpolated);
    ``ctc_text``: the path's characters."""
    if not text:
        return []
    if not path:
        return [None] * len(text)
    xs = np.array([x for _, x in path], dtype=float)
    mapping = align.char_map(text, ctc_text)
    known = [(k, xs[m]) for k, m in enumerate(mapping) if m is not None]
    if not known:
        return [None] * len(text)
    ks, kx = np.array([k for k, _ in known], float), np.array([x for _, x in known], float)
    centers = np.interp(np.arange(len(text)), ks, kx)
    half = np.diff(centers, prepend=centers[0] - 8, append=centers[-1] + 8) / 2
    return [crop.page_box(max(0.0, centers[i] - max(2.0, half[i])), centers[i] + max(2.0, half[i + 1]))
            for i in range(len(text))]
