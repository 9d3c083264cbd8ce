"""Page -> text line boxes: from the PDF text layer, or segmented from the pixels.

Pixel segmentation is a recursive XY-cut on projection profiles: at each node split at the widest
white gap, preferring a vertical gutter (columns) when it is wider than the horizontal gaps, so
reading order comes out as columns top to bottom, left to right. Leaves are lines; a leaf much
taller than the typical line is split at its faintest row (touching lines).
"""

from __future__ import annotations

import numpy as np

from .pages import Page, TextLine

Box = tuple[float, float, float, float]


def ink_mask(gray: np.ndarray) -> np.ndarray:
    """Boolean ink mask with a threshold halfway between paper and ink levels."""
    sample = gray[:: max(1, gray.shape[0] // 256), :: max(1, gray.shape[1] // 256)]
    lo, hi = np.percentile(sample, [1, 90])
    if hi - lo < 30:  # blank page
        return np.zeros_like(gray, dtype=bool)
    return gray < (lo + hi) / 2


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
    out: list[Box] = []

    def visit(y0: int, y1: int, x0: int, x1: int, depth: int) -> None:
        sub = ink[y0:y1, x0:x1]
        ys, xs = np.flatnonzero(sub.any(1)), np.flatnonzero(sub.any(0))
        if ys.size == 0 or xs.size == 0:
            return
        y0, y1, x0, x1 = y0 + ys[0], y0 + ys[-1] + 1, x0 + xs[0], x0 + xs[-1] + 1
        sub = ink[y0:y1, x0:x1]
        hgaps = _gaps(sub.sum(1), tol)
        # a single line splits only at very wide gaps (faint glyphs can open gaps between words)
        min_v = gutter_min if y1 - y0 > 1.6 * line_h else 3 * line_h
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
        elif y1 - y0 > 1.7 * line_h and y1 - y0 >= 2 * min_height:
            prof = sub.sum(1)
            lo, hi = int(0.3 * line_h), len(prof) - int(0.3 * line_h)
            cut = y0 + lo + int(np.argmin(prof[lo:hi])) if hi > lo else (y0 + y1) // 2
            visit(y0, cut, x0, x1, depth + 1)
            visit(cut, y1, x0, x1, depth + 1)
        elif y1 - y0 >= min_height // 2:
            out.append((float(x0), float(y0), float(x1), float(y1)))

    visit(0, ink.shape[0], 0, ink.shape[1], 0)
    return _absorb_fragments(out, line_h)


def _absorb_fragments(boxes: list[Box], line_h: float) -> list[Box]:
    """Merge slivers (a comma's tail, an underscore cut off by a faint row) into the line they
    touch; drop isolated specks. Reading order is kept."""
    is_line = [b[3] - b[1] >= 0.45 * line_h or b[2] - b[0] >= 3 * line_h for b in boxes]
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
