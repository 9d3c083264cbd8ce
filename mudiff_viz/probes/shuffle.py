"""Semantic Shuffle (our reconstruction): permute words within lines, keep every glyph.

The paper's benchmark construction is not published; this is ours, labelled as such in
docs/semantic-shuffle.md. Two inputs:

- PDF with a text layer: each line is redacted (text only, never images or line art) and its words
  are written back in permuted order with one TextWriter, in the same font and size, from the same
  left edge and baseline, keeping the original gaps between words. Total line width is unchanged,
  so the page looks the same but reads as nonsense; the ground truth is the shuffled text layer.
- Image without a text layer: within each line found by ``segment_lines``, word crops (split at
  wide blank column runs) are permuted as whole pixel columns, gaps staying in place, so every glyph
  keeps its exact pixels; ground truth follows from a sidecar text when its lines match.

Randomness is per line (seed, page, line), so a page is reproducible and lines are independent.
"""

from __future__ import annotations

import hashlib
import io
import math
import random
from dataclasses import dataclass, field
from typing import Hashable, Sequence

import numpy as np
from PIL import Image

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits, current
from mudiff_viz.inputs.page import Page
from mudiff_viz.inputs.pages import open_image, sniff_kind
from mudiff_viz.inputs.pdf import PDF_LOCK, open_pdf, render_pdf_page, run_worker
from mudiff_viz.inputs.regions import ink_mask, segment_lines
from mudiff_viz.probes.pdf_text import Fonts, page_lines, remove_lines, write_words

# ---- the permutation --------------------------------------------------------------------------


def line_rng(seed: int, page_index: int, line_index: int) -> random.Random:
    """Independent, reproducible randomness for one line (str seeds hash with SHA-512, not hash())."""
    return random.Random(f"mudiff-shuffle:{seed}:{page_index}:{line_index}")


def check_level(level: float) -> float:
    if not isinstance(level, (int, float)) or math.isnan(level) or not 0.0 <= level <= 1.0:
        raise UserInputError(f"shuffle level must be in [0, 1], got {level!r}")
    return float(level)


def _derangement(k: int, rng: random.Random) -> list[int]:
    """A uniformly random permutation of range(k) with no fixed point (k >= 2)."""
    while True:
        perm = list(range(k))
        rng.shuffle(perm)
        if all(i != v for i, v in enumerate(perm)):
            return perm


def permutation(keys: Sequence[Hashable], level: float, rng: random.Random) -> list[int]:
    """Word order for one line at ``level``: ``order[slot]`` is the original index placed there.

    k = round(level * n) words (half up) are chosen and deranged, so each chosen word leaves its
    slot; one word cannot move alone, so k = 1 moves nothing. Chosen sets are nested across levels
    for the same rng state (one priority shuffle first). At level 1 the sequence of ``keys``
    changes whenever the line has two different keys (repeated words can make a derangement read
    the same; then two chosen slots with different keys are swapped instead).
    """
    level = check_level(level)
    n = len(keys)
    order = list(range(n))
    k = math.floor(level * n + 0.5)
    if k < 2:
        return order
    priority = list(range(n))
    rng.shuffle(priority)
    chosen = sorted(priority[:k])
    original = list(keys)
    cand = order
    for _ in range(20):
        cand = list(order)
        for slot, src in zip(chosen, _derangement(k, rng)):
            cand[slot] = chosen[src]
        if [keys[i] for i in cand] != original:
            return cand
    # repeated words defeated every draw: swap the first two chosen slots whose keys differ
    first = chosen[0]
    for other in chosen[1:]:
        if keys[other] != keys[first]:
            cand = list(order)
            cand[first], cand[other] = other, first
            return cand
    return cand  # all chosen words are identical: nothing visible can change


# ---- results ----------------------------------------------------------------------------------


@dataclass
class LineShuffle:
    """What happened to one line: its words in original order and the new order."""

    page_index: int
    words: list[str]
    order: list[int]
    font_scale: float = 1.0  # < 1 when the line was shrunk to fit
    substituted: bool = False  # a word's font could not be reused (Base-14 substitute written)

    @property
    def shuffled(self) -> list[str]:
        return [self.words[i] for i in self.order]

    @property
    def changed(self) -> bool:
        return self.shuffled != self.words


@dataclass
class ShuffleResult:
    """A shuffled file (PDF or PNG bytes), its per-line record and the ground truth when known."""

    data: bytes
    kind: str  # "pdf" | "png"
    level: float
    seed: int
    lines: list[LineShuffle] = field(default_factory=list)
    gt_text: str | None = None  # image path: shuffled sidecar text; PDF path: read the text layer
    note: str = ""  # caveats: why the ground truth is unknown, lines kept in place, substitute fonts


# ---- PDF with a text layer --------------------------------------------------------------------

def _shuffle_pdf_page(doc, page, page_index: int, level: float, seed: int, rerender: bool) -> list[LineShuffle]:
    """Shuffle one page in place; returns the per-line record."""

    if page.rotation:
        page.remove_rotation()
    lines = page_lines(page)
    plans = [
        LineShuffle(page_index, [w.text for w in ws],
                    permutation([w.text for w in ws], level, line_rng(seed, page_index, i)))
        for i, ws in enumerate(lines)
    ]
    if not rerender and not any(p.changed for p in plans):
        return plans
    fonts = Fonts(doc, page)  # before redaction, which may drop the page's font resources
    # Every line is rewritten (not only changed ones) so the content stream keeps the reading order.
    remove_lines(page, lines)
    placed = []
    for ws, plan in zip(lines, plans):
        new = [ws[i] for i in plan.order]
        picked = [fonts.get(w.font, w.flags, w.text) for w in new]
        faces = [face for face, _ in picked]
        plan.substituted = not all(exact for _, exact in picked)
        gaps = [b.x0 - a.x1 for a, b in zip(ws, ws[1:])]
        widths = [f.text_length(w.text, fontsize=w.size) for f, w in zip(faces, new)]
        room = (ws[-1].x1 - ws[0].x0) - sum(gaps)
        scale = min(1.0, room / sum(widths)) if sum(widths) > 0 else 1.0
        plan.font_scale = round(scale, 4)
        x = ws[0].x0
        for j, (w, face, width) in enumerate(zip(new, faces, widths)):
            text = w.text if j == len(new) - 1 else w.text + " "
            placed.append((w, face, x, w.size * scale, text))
            x += width * scale + (gaps[j] if j < len(gaps) else 0.0)
    write_words(page, placed)
    return plans


def shuffle_pdf(
    data: bytes,
    level: float,
    seed: int,
    pages: Sequence[int] | None = None,
    rerender: bool = False,
    limits: Limits | None = None,
) -> ShuffleResult:
    """Word-shuffle the text layer of ``pages`` (default all) of an untrusted PDF.

    ``rerender`` rewrites lines even when nothing moved (level 0 as a control that went through
    the same redact-and-write path); without it an unchanged page is returned byte for byte.
    """

    level = check_level(level)
    limits = limits or current()
    with PDF_LOCK:
        doc = open_pdf(data, limits)
        try:
            indices = list(range(doc.page_count)) if pages is None else list(pages)
            record: list[LineShuffle] = []
            for i in indices:
                if not 0 <= i < doc.page_count:
                    raise UserInputError(f"page {i + 1} does not exist: the PDF has {doc.page_count} pages")
                page = doc[i]
                if max(page.rect.width, page.rect.height) > limits.max_page_points:
                    raise UserInputError(f"page {i + 1} is larger than the limit of {limits.max_page_points:.0f} pt")
                record.extend(_shuffle_pdf_page(doc, page, i, level, seed, rerender))
            if not record:
                raise UserInputError("the PDF has no text layer to shuffle (scanned? save the page as an image)")
            touched = rerender or any(r.changed for r in record)
            out = doc.tobytes(garbage=3, deflate=True, no_new_id=True) if touched else data
        finally:
            doc.close()
    subs = sum(1 for r in record if r.substituted)
    note = f"{subs} of {len(record)} lines written in a substitute font (shrunk to fit)" if subs else ""
    return ShuffleResult(data=out, kind="pdf", level=level, seed=seed, lines=record, note=note)


def shuffle_pdf_isolated(
    data: bytes,
    level: float,
    seed: int,
    pages: Sequence[int] | None = None,
    rerender: bool = False,
    limits: Limits | None = None,
) -> ShuffleResult:
    """:func:`shuffle_pdf` in the PDF worker process, under its time and memory limits (uploads)."""

    level = check_level(level)
    limits = limits or current()
    task = ["shuffle", repr(level), str(seed), "all" if pages is None else ",".join(map(str, pages)), "1" if rerender else "0"]
    meta, out = run_worker(task, data, limits, action="shuffle")
    lines = [LineShuffle(**d) for d in meta["lines"]]
    return ShuffleResult(data=out, kind="pdf", level=level, seed=seed, lines=lines, note=meta.get("note", ""))


# ---- image without a text layer ---------------------------------------------------------------


def _gray(image: Image.Image) -> np.ndarray:
    return np.asarray(image.convert("L"))


def word_gap_threshold(gap_widths: Sequence[int], line_height: float) -> float:
    """Smallest blank-column run that separates words: Otsu's split of the page's gap widths
    (letter gaps and word spaces are two clear modes), bounded by the line height."""
    lo, hi = max(2.0, 0.12 * line_height), max(3.0, 0.6 * line_height)
    widths = np.asarray([w for w in gap_widths if w > 0], dtype=float)
    if widths.size < 8 or widths.min() == widths.max():
        return float(np.clip(0.3 * line_height, lo, hi))
    best_t, best_score = float(widths.max()), -1.0
    for t in np.unique(widths)[1:]:
        a, b = widths[widths < t], widths[widths >= t]
        score = a.size * b.size * (a.mean() - b.mean()) ** 2
        if score > best_score:
            best_t, best_score = float(t), score
    return float(np.clip(best_t, lo, hi))


def _blank_runs(blank: np.ndarray) -> list[tuple[int, int]]:
    """Interior runs of True as (start, end)."""
    padded = np.concatenate([[False], blank, [False]]).astype(np.int8)
    diff = np.diff(padded)
    return [(int(s), int(e)) for s, e in zip(np.flatnonzero(diff == 1), np.flatnonzero(diff == -1))
            if s > 0 and e < len(blank)]


@dataclass
class ImageLine:
    """One detected line: its box (page pixels) and word column spans [start, end) inside it.

    ``movable`` is False where moving columns would be unsafe or would break the ground truth: the
    box overlaps an earlier line, or the known word count cannot be matched unambiguously.
    """

    box: tuple[int, int, int, int]
    words: list[tuple[int, int]]
    movable: bool = True


def _cuts_for_count(runs: list[tuple[int, int]], n_words: int, min_gap: float) -> list[tuple[int, int]] | None:
    """The n_words - 1 widest blank runs, or None when that choice is ambiguous (a tie at the
    boundary) or impossible (too few runs, or a cut narrower than any word space could be)."""
    need = n_words - 1
    if need <= 0:
        return []
    if need > len(runs):
        return None
    widths = sorted((e - s for s, e in runs), reverse=True)
    t = widths[need - 1]
    if t < min_gap or (need < len(widths) and widths[need] == t):
        return None
    return [r for r in runs if r[1] - r[0] >= t]


def image_lines(image: Image.Image, word_counts: Sequence[int] | None = None) -> list[ImageLine]:
    """Lines from ``segment_lines`` (the same boxes the nano backend decodes) split into words.

    Without ``word_counts`` words split at blank column runs wider than the page's word-gap
    threshold. With the known word count of every line (from a ground truth), each line is cut at
    its widest runs instead, so crops and ground-truth words correspond one to one.
    """

    gray = _gray(image)
    ink = ink_mask(gray)
    boxes = [tuple(int(round(v)) for v in b) for b in segment_lines(gray)]
    if word_counts is not None and len(word_counts) != len(boxes):
        raise UserInputError(f"{len(word_counts)} word counts for {len(boxes)} detected lines")
    runs = [_blank_runs(ink[y0:y1, x0:x1].sum(0) == 0) for x0, y0, x1, y1 in boxes]
    heights = [y1 - y0 for _, y0, _, y1 in boxes]
    line_h = float(np.median(heights)) if heights else 0.0
    threshold = word_gap_threshold([e - s for r in runs for s, e in r], line_h)
    out: list[ImageLine] = []
    for i, (box, line_runs) in enumerate(zip(boxes, runs)):
        x0, y0, x1, y1 = box
        overlaps = any(not (y1 <= b.box[1] or y0 >= b.box[3] or x1 <= b.box[0] or x0 >= b.box[2]) for b in out)
        cuts: list[tuple[int, int]] | None = [r for r in line_runs if r[1] - r[0] >= threshold]
        movable = not overlaps
        if word_counts is not None:
            counted = _cuts_for_count(line_runs, word_counts[i], max(2.0, 0.12 * line_h))
            movable = movable and counted is not None
            cuts = counted if counted is not None else cuts
        starts = [0] + [e for _, e in cuts]
        ends = [s for s, _ in cuts] + [x1 - x0]
        out.append(ImageLine(box=box, words=[(x0 + a, x0 + b) for a, b in zip(starts, ends)], movable=movable))
    return out


def shuffle_image_array(
    pixels: np.ndarray, lines: list[ImageLine], level: float, seed: int
) -> tuple[np.ndarray, list[LineShuffle]]:
    """Permute word column blocks within each movable line of an (H, W[, C]) array; the gaps
    between words stay in place. Every output column of a line is a whole input column, so glyph
    pixels are identical and the line's width and spacing are unchanged."""
    out = pixels.copy()
    record: list[LineShuffle] = []
    for li, line in enumerate(lines):
        x0, y0, x1, y1 = line.box
        crops = [pixels[y0:y1, a:b] for a, b in line.words]
        keys = [hashlib.sha1(c.tobytes()).hexdigest() + f":{c.shape[1]}" for c in crops]
        order = permutation(keys, level, line_rng(seed, 0, li)) if line.movable else list(range(len(crops)))
        record.append(LineShuffle(0, keys, order))
        if order == list(range(len(crops))):
            continue
        gaps = [pixels[y0:y1, b:a2] for (_, b), (a2, _) in zip(line.words, line.words[1:])]
        x = line.words[0][0]
        for j, src in enumerate(order):
            out[y0:y1, x : x + crops[src].shape[1]] = crops[src]
            x += crops[src].shape[1]
            if j < len(gaps):
                out[y0:y1, x : x + gaps[j].shape[1]] = gaps[j]
                x += gaps[j].shape[1]
    return out, record


def _gt_lines(gt_text: str | None) -> list[str] | None:
    return None if gt_text is None else [" ".join(ln.split()) for ln in gt_text.splitlines() if ln.strip()]


def shuffle_image(
    image: Image.Image, level: float, seed: int, gt_text: str | None = None
) -> tuple[Image.Image, ShuffleResult]:
    """Word-crop shuffle of a page image; returns the image and its record (PNG bytes, ground truth).

    With ``gt_text`` (one line per detected line, as in a sidecar .txt) the words are cut to match
    it and the ground truth is permuted with the crops; lines that cannot be matched unambiguously
    stay in place. When the line counts differ, the ground truth of a changed page is unknown.
    """

    level = check_level(level)
    rgb = image.convert("RGB")
    gt = _gt_lines(gt_text)
    n_lines = len(segment_lines(_gray(rgb))) if gt is not None else 0
    note = "" if gt is not None else "no ground truth for the original (give a sidecar .txt)"
    if gt is not None and len(gt) != n_lines:
        note = f"ground truth has {len(gt)} lines but {n_lines} were detected"
    counts = [len(ln.split()) for ln in gt] if gt is not None and not note else None
    lines = image_lines(rgb, counts)
    if not lines:
        raise UserInputError("no text lines found in the image")
    arr, record = shuffle_image_array(np.asarray(rgb), lines, level, seed)
    out = Image.fromarray(arr, "RGB")
    buf = io.BytesIO()
    out.save(buf, format="PNG")
    shuffled_gt = None
    if counts is not None:
        shuffled_gt = "\n".join(
            " ".join(text.split()[j] for j in r.order) if line.movable else text
            for text, r, line in zip(gt, record, lines)
        )
        kept = sum(1 for ln in lines if not ln.movable)
        if kept:
            note = f"{kept} of {len(lines)} lines kept in place (word cuts ambiguous against the ground truth)"
    elif gt is not None and not any(r.changed for r in record):
        shuffled_gt = "\n".join(gt)  # nothing moved: the original's ground truth still holds
    result = ShuffleResult(data=buf.getvalue(), kind="png", level=level, seed=seed, lines=record,
                           gt_text=shuffled_gt, note=note)
    return out, result


# ---- one page, for the app and the benchmark --------------------------------------------------


@dataclass
class ShuffledPage:
    """A shuffled page ready to decode, with its ground truth (None when unknown)."""

    page: Page
    gt_text: str | None
    result: ShuffleResult | None  # None for a page probed another way (occluded, degraded)


def shuffle_page(
    data: bytes,
    level: float,
    seed: int,
    page_index: int = 0,
    dpi: float = 150,
    gt_text: str | None = None,
    trusted: bool = False,
    rerender: bool = False,
    limits: Limits | None = None,
) -> ShuffledPage:
    """Shuffle one page of a PDF or image (bytes) and load the result as a Page.

    PDF: the ground truth is the shuffled page's text layer (what the decoders' regions read).
    Image: ``gt_text`` is the original's (sidecar) text; it is permuted alongside the crops.
    ``trusted`` renders in-process (our own synthetic PDFs); uploads render in a subprocess.
    """
    limits = limits or current()
    kind = sniff_kind(data)
    if kind == "pdf":

        if trusted:
            result = shuffle_pdf(data, level, seed, pages=[page_index], rerender=rerender, limits=limits)
        else:  # uploads: redaction and rewriting run in the isolated worker, like rendering
            result = shuffle_pdf_isolated(data, level, seed, pages=[page_index], rerender=rerender, limits=limits)
        r = render_pdf_page(result.data, page_index, dpi, limits, isolate=not trusted)
        page = Page(
            image=r.image, source=f"shuffled-{level:g}-seed{seed}.pdf", page_index=page_index, page_count=r.page_count, dpi=r.dpi,
            sha256=hashlib.sha256(result.data).hexdigest(), lines=r.lines or None,
        )
        result.gt_text = page.text
        return ShuffledPage(page=page, gt_text=page.text, result=result)
    if page_index != 0:
        raise UserInputError(f"page {page_index + 1} does not exist: an image has one page")  # people count from 1
    upright, orientation = open_image(data, kind, limits)
    image, result = shuffle_image(upright, level, seed, gt_text)
    page = Page(image=image, source=f"shuffled-{level:g}-seed{seed}.png", sha256=hashlib.sha256(result.data).hexdigest(),
                exif_orientation=orientation)
    return ShuffledPage(page=page, gt_text=result.gt_text, result=result)
