"""Page -> regions: text lines or text blocks, from the PDF text layer or segmented from the pixels.

This is the one place regions are found; a backend says which unit it reads
(``Backend.region_unit``) and the pipeline hands it the regions (:func:`find_regions`).

Pixel segmentation is a recursive XY-cut on projection profiles: at each node split at the widest
white gap, preferring a vertical gutter (columns) when it is wider than the horizontal gaps, so
reading order comes out as columns top to bottom, left to right. Leaves are lines; a leaf much
taller than the typical line is split at its faintest row (touching lines), unless its letters'
stems span most of its height: then it is one line of large type (a title), read whole.

Lines group into text blocks (:func:`group_blocks`) the way a layout model's text blocks hold
them: consecutive lines of one column with no paragraph gap between them.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageFilter

from mudiff_viz.core.types import Box, Region, RegionUnit, joined_chars, union
from mudiff_viz.inputs.page import Page, TextLine


NOISY = 3.0  # grey levels of pixel noise (robust standard deviation) above which the page is smoothed


def noise_level(gray: np.ndarray) -> float:
    """Pixel noise of a page in grey levels: the robust spread of each pixel against its 3x3 median,
    in the middle of the page (a clean render has none; a phone photo or a noisy scan several levels)."""
    h, w = gray.shape
    y0, x0 = max(0, h // 2 - 256), max(0, w // 2 - 256)  # the middle: a straightened scan's corners are blank fill
    sample = gray[y0 : y0 + 512, x0 : x0 + 512]
    smooth = np.asarray(Image.fromarray(sample).filter(ImageFilter.MedianFilter(3)), dtype=np.float32)
    return float(1.4826 * np.median(np.abs(sample.astype(np.float32) - smooth)))


def ink_mask(gray: np.ndarray) -> np.ndarray:
    """Boolean ink mask with a threshold halfway between paper and ink levels. On a noisy page the
    grey is median-filtered first and ink pixels with few ink neighbours are dropped, so noise on
    the paper does not read as specks of ink (specks fill the white gaps the line cut looks for,
    and stretch line boxes across empty paper)."""
    noisy = noise_level(gray) > NOISY
    if noisy:
        gray = np.asarray(Image.fromarray(gray).filter(ImageFilter.MedianFilter(3)))
    sample = gray[:: max(1, gray.shape[0] // 256), :: max(1, gray.shape[1] // 256)]
    lo, hi = np.percentile(sample, [1, 90])
    if hi - lo < 30:  # blank page
        return np.zeros_like(gray, dtype=bool)
    ink = gray < (lo + hi) / 2
    return _without_specks(ink) if noisy else ink


def _without_specks(ink: np.ndarray, size: int = 5, least: int = 6) -> np.ndarray:
    """Ink pixels with at least ``least`` ink pixels in the ``size`` x ``size`` square around them:
    a glyph's stroke has more (a 1-pixel stroke crossing the square has 5, itself included: 6 is
    two pixels' thickness, which strokes have at 100 dpi and up, once blurred), a speck of noise fewer."""
    r = size // 2
    padded = np.pad(ink.astype(np.int32), r + 1)[:-1, :-1]
    c = padded.cumsum(0).cumsum(1)
    count = c[size:, size:] - c[:-size, size:] - c[size:, :-size] + c[:-size, :-size]
    return ink & (count >= least)


def _runs(white: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of runs of True."""
    if white.size == 0:
        return []
    padded = np.concatenate([[False], white, [False]])
    diff = np.diff(padded.astype(np.int8))
    return list(zip(np.flatnonzero(diff == 1), np.flatnonzero(diff == -1)))


def _gaps(profile: np.ndarray, tolerance: int) -> list[tuple[int, int]]:
    """Interior white runs (not touching the ends) of a projection profile."""
    white = profile <= tolerance
    return [(s, e) for s, e in _runs(white) if s > 0 and e < len(profile)]


def stem_lengths(ink: np.ndarray) -> np.ndarray:
    """Each ink pixel's vertical run of ink (0 on paper): the stems of the letters it belongs to.
    Stems scale with the type size, and do not cross the white between lines."""
    h = ink.shape[0]
    rows = np.arange(h)[:, None]
    above = rows - np.maximum.accumulate(np.where(ink, -1, rows), axis=0)  # run so far, from the top
    flipped = ink[::-1]
    below = (rows - np.maximum.accumulate(np.where(flipped, -1, rows), axis=0))[::-1]
    return np.where(ink, above + below - 1, 0)


def is_one_line(ink: np.ndarray, share: float = 0.5) -> bool:
    """A block of ink (trimmed to it, no white row across it) is one line when a quarter of its ink
    or more lies in stems at least ``share`` of its height: large type. Lines of small type touching one another
    have stems of one line's x-height or ascender, a third of the block's height or less."""
    stems = stem_lengths(ink)[ink]
    return stems.size > 0 and float(np.percentile(stems, 75)) >= share * ink.shape[0]


def segment_lines(gray: np.ndarray, min_height: int = 6) -> list[Box]:
    """Text line boxes (page pixels) in reading order, from a greyscale page."""
    ink = ink_mask(gray)
    rows = ink.sum(1)
    tol = 1
    # typical line height: runs of inked rows over the whole page
    bands = [(s, e) for s, e in _runs(rows > tol) if e - s >= min_height]
    if not bands:
        return []
    line_h = float(np.median([e - s for s, e in bands]))
    gutter_min = max(12.0, 1.2 * line_h)  # column gutters, far wider than word spaces
    min_ink = 0.03 * line_h * line_h  # ink pixels of the smallest line (one narrow glyph holds more)
    out: list[Box] = []

    def visit(y0: int, y1: int, x0: int, x1: int, depth: int) -> None:
        sub = ink[y0:y1, x0:x1]
        ys, xs = np.flatnonzero(sub.any(1)), np.flatnonzero(sub.any(0))
        if ys.size == 0 or xs.size == 0:
            return
        y0, y1, x0, x1 = y0 + ys[0], y0 + ys[-1] + 1, x0 + xs[0], x0 + xs[-1] + 1
        sub = ink[y0:y1, x0:x1]
        hgaps = _gaps(sub.sum(1), tol)
        tall = y1 - y0 > 1.6 * line_h
        big_line = tall and not hgaps and is_one_line(sub)  # a line of large type: a title
        # a single line splits only at very wide gaps (faint glyphs can open gaps between words;
        # a title's word spaces grow with its type, a third of its height)
        min_v = max(3 * line_h, 1.5 * (y1 - y0)) if big_line else gutter_min if tall else 3 * line_h
        vgaps = [g for g in _gaps(sub.sum(0), tol) if g[1] - g[0] >= min_v]
        widest_h = max((e - s for s, e in hgaps), default=0)
        widest_v = max((e - s for s, e in vgaps), default=0)
        if depth > 40:
            hgaps, vgaps = [], []
        if vgaps and widest_v > widest_h:
            cuts = [x0] + [x0 + (s + e) // 2 for s, e in vgaps] + [x1]
            for a, b in zip(cuts, cuts[1:]):
                visit(y0, y1, a, b, depth + 1)
        elif hgaps:
            cuts = [y0] + [y0 + (s + e) // 2 for s, e in hgaps] + [y1]
            for a, b in zip(cuts, cuts[1:]):
                visit(a, b, x0, x1, depth + 1)
        elif y1 - y0 > 1.7 * line_h and y1 - y0 >= 2 * min_height and not big_line:
            prof = sub.sum(1)
            lo, hi = int(0.3 * line_h), len(prof) - int(0.3 * line_h)
            cut = y0 + lo + int(np.argmin(prof[lo:hi])) if hi > lo else (y0 + y1) // 2
            visit(y0, cut, x0, x1, depth + 1)
            visit(cut, y1, x0, x1, depth + 1)
        elif y1 - y0 >= min_height // 2 and sub.sum() >= min_ink:  # specks of noise are not a line
            out.append((float(x0), float(y0), float(x1), float(y1)))

    visit(0, ink.shape[0], 0, ink.shape[1], 0)
    return _absorb_fragments(out, line_h)


def _absorb_fragments(boxes: list[Box], line_h: float) -> list[Box]:
    """Merge slivers (a comma's tail, an underscore cut off by a faint row) into the line they
    touch; drop isolated specks. Reading order is kept."""
    # a wide run of dots or dashes is a line; an underscore cut off below its line is not
    is_line = [b[3] - b[1] >= 0.45 * line_h or (b[2] - b[0] >= 3 * line_h and b[3] - b[1] >= 0.25 * line_h)
               for b in boxes]
    merged = list(boxes)
    for j, b in enumerate(boxes):
        if is_line[j]:
            continue
        best, best_d = None, 0.6 * line_h
        for i, ln in enumerate(merged):
            if not is_line[i] or b[0] > ln[2] or b[2] < ln[0]:
                continue
            d = max(ln[1] - b[3], b[1] - ln[3], 0.0)
            if d <= best_d:
                best, best_d = i, d
        if best is not None:
            ln = merged[best]
            merged[best] = (min(ln[0], b[0]), min(ln[1], b[1]), max(ln[2], b[2]), max(ln[3], b[3]))
    return [b for b, keep in zip(merged, is_line) if keep]


def group_blocks(boxes: list[Box], max_lines: int = 8) -> list[list[int]]:
    """Lines in reading order -> text blocks (lists of line indices), each at most ``max_lines``.

    A block ends where the next line does not continue it: it moves up or sideways (another
    column), or it sits further below than the page's typical line pitch allows (x 1.3: a
    paragraph gap or a heading). The step is measured on both the tops and the bottoms of the
    boxes and the smaller one counts, so ink boxes of lines without ascenders or descenders do not
    open false gaps. Long blocks are cut into near-equal chunks.
    """
    if not boxes:
        return []
    steps = []
    for a, b in zip(boxes, boxes[1:]):
        if _continues_column(a, b):
            steps.append(min(b[1] - a[1], b[3] - a[3]))
    heights = [b[3] - b[1] for b in boxes]
    h = float(np.median(heights))
    pitches = [s for s in steps if 0 < s < 3 * h]
    pitch = float(np.median(pitches)) if pitches else 1.2 * h
    blocks: list[list[int]] = [[0]]
    for i in range(1, len(boxes)):
        a, b = boxes[i - 1], boxes[i]
        step = min(b[1] - a[1], b[3] - a[3])
        if _continues_column(a, b) and step <= 1.3 * pitch:
            blocks[-1].append(i)
        else:
            blocks.append([i])
    out: list[list[int]] = []
    for block in blocks:
        n = -(-len(block) // max_lines)
        size, extra = divmod(len(block), n)
        start = 0
        for k in range(n):
            end = start + size + (1 if k < extra else 0)
            out.append(block[start:end])
            start = end
    return out


def _continues_column(a: Box, b: Box) -> bool:
    """b is below a and overlaps it horizontally by at least half the narrower line."""
    overlap = min(a[2], b[2]) - max(a[0], b[0])
    return b[1] > a[1] and overlap >= 0.5 * min(a[2] - a[0], b[2] - b[0])


def find_regions(page: Page, unit: RegionUnit) -> list[Region]:
    """The page's regions in reading order: its text-layer lines when it has them, else lines
    segmented from its pixels (a scan should be straightened first: inputs/scan.py), as lines or
    grouped into text blocks. Regions from a text layer carry its text and character boxes."""
    if unit.kind not in ("line", "block"):
        raise ValueError(f"region unit must be 'line' or 'block', got {unit.kind!r}")
    lines: list[TextLine] | None = page.lines or None
    boxes = [ln.bbox for ln in lines] if lines else segment_lines(np.asarray(page.image.convert("L")))
    if unit.kind == "line":
        if lines:
            return [Region(bbox=ln.bbox, kind="line", gt_text=ln.text, gt_chars=[(c.c, c.bbox) for c in ln.chars])
                    for ln in lines]
        return [Region(bbox=b, kind="line") for b in boxes]
    out = []
    for block in group_blocks(boxes, unit.max_lines):
        line_boxes = [boxes[i] for i in block]
        region = Region(bbox=union(line_boxes), kind="text", meta={"lines": line_boxes})
        if lines:
            region.gt_text = "\n".join(lines[i].text for i in block)
            region.gt_chars = joined_chars([lines[i] for i in block])
        out.append(region)
    return out
