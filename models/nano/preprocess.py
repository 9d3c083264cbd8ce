"""Line images for the nano models: the same crop at training and at inference.

A line box (from the PDF text layer or from pixel segmentation) is tightened to the ink it holds,
padded by a margin proportional to its height and scaled to 32 pixels high with ink = 1. Training
jitters the margins so boxes from either source look alike to the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

LINE_HEIGHT = 32
MAX_LINE_WIDTH = 2400


@dataclass
class LineCrop:
    """A normalised line image and the map back to page pixels: page_x = x0 + line_x / scale."""

    pixels: np.ndarray  # (LINE_HEIGHT, w) uint8, ink high
    x0: float
    y0: float
    scale: float  # line pixels per page pixel (horizontal)
    y1: float

    def page_box(self, lx0: float, lx1: float) -> tuple[float, float, float, float]:
        """Page box of a horizontal span of the line image."""
        return (self.x0 + lx0 / self.scale, self.y0, self.x0 + lx1 / self.scale, self.y1)


def to_gray(image: Image.Image) -> np.ndarray:
    return np.asarray(image.convert("L"), dtype=np.uint8)


def ink_levels(gray: np.ndarray) -> tuple[float, float]:
    """(paper, ink) grey levels of a page: robust percentiles, so scans with grey paper work."""
    sample = gray[:: max(1, gray.shape[0] // 256), :: max(1, gray.shape[1] // 256)]
    lo, hi = np.percentile(sample, [1, 90])
    return float(hi), float(min(lo, hi - 40))


def ink_extent(mask: np.ndarray, axis: int) -> tuple[int, int] | None:
    idx = np.flatnonzero(mask.any(axis=axis))
    if idx.size == 0:
        return None
    return int(idx[0]), int(idx[-1]) + 1


def crop_line(
    gray: np.ndarray,
    bbox: tuple[float, float, float, float],
    levels: tuple[float, float],
    ref_height: float | None = None,
    margin_x: float = 0.3,
    margin_y: float = 0.12,
    x_span: tuple[float, float] | None = None,
) -> LineCrop:
    """Crop one line: tighten ``bbox`` to its ink, pad, scale to LINE_HEIGHT. Ink -> high values.

    ``x_span`` (page x0, x1) restricts the crop horizontally (training crops word spans).
    ``ref_height`` (typical ink height on the page) grows lines without ascenders/descenders so
    glyph sizes stay comparable between lines.
    """
    paper, ink = levels
    thr = (paper + ink) / 2
    h_page, w_page = gray.shape
    x0, y0, x1, y1 = bbox
    pad = 0.15 * (y1 - y0)
    if x_span is not None:
        x0, x1 = x_span
        pad = 0.0
    ix0, ix1 = int(max(0, x0 - pad)), int(min(w_page, x1 + pad + 1))
    iy0, iy1 = int(max(0, y0)), int(min(h_page, y1 + 1))
    window = gray[iy0:iy1, ix0:ix1] < thr
    ys = ink_extent(window, axis=1)
    xs = ink_extent(window, axis=0)
    if ys is None or xs is None:  # a blank box: keep it as it is
        ty0, ty1, tx0, tx1 = float(iy0), float(max(iy1, iy0 + 1)), float(ix0), float(max(ix1, ix0 + 1))
    else:
        ty0, ty1 = iy0 + ys[0], iy0 + ys[1]
        tx0, tx1 = ix0 + xs[0], ix0 + xs[1]
        if x_span is not None:  # keep the requested span even where it starts or ends in white
            tx0, tx1 = min(tx0, x_span[0]), max(tx1, x_span[1])
    ink_h = ty1 - ty0
    if ref_height and ink_h < 0.75 * ref_height:
        grow = ref_height - ink_h
        ty0, ty1 = ty0 - grow / 2, ty1 + grow / 2
        ink_h = ref_height
    cy0, cy1 = ty0 - margin_y * ink_h, ty1 + margin_y * ink_h
    cx0, cx1 = tx0 - margin_x * ink_h, tx1 + margin_x * ink_h
    crop = _crop_padded(gray, cx0, cy0, cx1, cy1, fill=paper)
    scale = LINE_HEIGHT / max(1.0, cy1 - cy0)
    out_w = int(round((cx1 - cx0) * scale))
    out_w = max(8, min(MAX_LINE_WIDTH, out_w))
    resized = np.asarray(Image.fromarray(crop).resize((out_w, LINE_HEIGHT), Image.BILINEAR), dtype=np.float32)
    inked = np.clip((paper - resized) / max(paper - ink, 1.0), 0.0, 1.0)
    return LineCrop(
        pixels=(inked * 255).astype(np.uint8),
        x0=cx0,
        y0=max(0.0, ty0),
        scale=out_w / max(1.0, cx1 - cx0),
        y1=min(float(h_page), ty1),
    )


def _crop_padded(gray: np.ndarray, x0: float, y0: float, x1: float, y1: float, fill: float) -> np.ndarray:
    h, w = gray.shape
    X0, Y0, X1, Y1 = int(np.floor(x0)), int(np.floor(y0)), int(np.ceil(x1)), int(np.ceil(y1))
    out = np.full((max(1, Y1 - Y0), max(1, X1 - X0)), fill, dtype=np.uint8)
    sx0, sy0, sx1, sy1 = max(0, X0), max(0, Y0), min(w, X1), min(h, Y1)
    if sx1 > sx0 and sy1 > sy0:
        out[sy0 - Y0 : sy1 - Y0, sx0 - X0 : sx1 - X0] = gray[sy0:sy1, sx0:sx1]
    return out


def reference_height(gray: np.ndarray, boxes, levels) -> float | None:
    """Median ink height of the lines on a page."""
    thr = sum(levels) / 2
    heights = []
    for x0, y0, x1, y1 in boxes:
        win = gray[int(max(0, y0)) : int(y1 + 1), int(max(0, x0)) : int(x1 + 1)] < thr
        ys = ink_extent(win, axis=1)
        if ys:
            heights.append(ys[1] - ys[0])
    return float(np.median(heights)) if heights else None


def collate(images: list[np.ndarray], multiple: int = 8):
    """Pad line images (ink-high uint8) into a float batch (B, 1, H, W) and their widths."""
    import torch

    w = max(img.shape[1] for img in images)
    w = ((w + multiple - 1) // multiple) * multiple
    batch = np.zeros((len(images), 1, LINE_HEIGHT, w), dtype=np.float32)
    for i, img in enumerate(images):
        batch[i, 0, :, : img.shape[1]] = img / 255.0
    widths = torch.tensor([img.shape[1] for img in images], dtype=torch.long)
    return torch.from_numpy(batch), widths
