"""Scans and phone photos made readable before their regions are found.

A page without a text layer (an uploaded PNG/JPEG, a scanned PDF) is read from its pixels, and
real scans are neither straight nor evenly lit. Before any region is found:

- the paper's lighting is estimated (a high percentile per tile, smoothed) and divided out, so a
  shadow or a lamp's gradient is not taken for ink;
- the skew is estimated by a projection-profile search: the ink pixels are projected onto the
  vertical axis along lines of each candidate angle, and text lines, when the angle is right, pile
  up into sharp peaks (the sum of squares of the profile is largest). A coarse search over
  +-``MAX_SKEW`` degrees, then a fine one; where several angles tie, their middle;
- the page is turned back by that angle about its centre, onto a canvas that holds all of it.

The decoders then read the straightened page, and every box they report (regions, tokens) is on
it; :class:`Straightening` (the trace's ``page.skew``) maps those boxes back onto the uploaded
image, which is what the player shows. Measured against the ``deskew`` package (Hough lines on
edges): docs/probes.md#scans-and-photos.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from PIL import Image

from mudiff_viz.inputs.page import Page, Straightening

MAX_SKEW = 10.0  # degrees searched either way: scanners and hand-held photos of a page
COARSE_STEP = 0.5  # degrees; then a fine search of +-COARSE_STEP around the best
FINE_STEP = 0.02
RESOLUTION = 0.1  # the skew is turned back in steps of this (below it, the page stays as it is)
TILE = 48  # pixels per tile of the paper-lighting estimate (several text lines at 150 dpi)
UNEVEN = 12.0  # grey levels between the brightest and darkest paper before lighting is flattened


def paper_level(gray: np.ndarray, tile: int = TILE) -> np.ndarray:
    """The paper's brightness under every pixel: the 90th percentile of each tile (text covers far
    less than a tenth of a tile), smoothed back to full size. The page is padded by reflection to
    whole tiles, so its last rows and columns have a tile of their own (a gradient would otherwise
    leave them darker than the paper level the tile before them gives)."""
    h, w = gray.shape
    th, tw = -(-h // tile), -(-w // tile)
    if th < 2 or tw < 2:
        return np.full(gray.shape, float(np.percentile(gray, 90)), dtype=np.float32)
    padded = np.pad(gray, ((0, th * tile - h), (0, tw * tile - w)), mode="reflect")
    cut = padded.reshape(th, tile, tw, tile).transpose(0, 2, 1, 3).reshape(th, tw, -1)
    tiles = np.percentile(cut, 90, axis=2).astype(np.float32)
    smooth = np.asarray(Image.fromarray(tiles).resize((tw * tile, th * tile), Image.BILINEAR), dtype=np.float32)
    return smooth[:h, :w]


def flatten_lighting(gray: np.ndarray) -> np.ndarray:
    """The page with its paper made evenly bright (uint8): each pixel divided by the paper under it."""
    paper = np.maximum(paper_level(gray), 1.0)
    return np.clip(gray.astype(np.float32) * (255.0 / paper), 0, 255).astype(np.uint8)


def is_unevenly_lit(gray: np.ndarray) -> bool:
    """The paper's brightness varies by more than ``UNEVEN`` grey levels across the page."""
    lo, hi = np.percentile(paper_level(gray), [2, 98])
    return float(hi - lo) > UNEVEN


def ink_pixels(gray: np.ndarray) -> np.ndarray:
    """Boolean ink of a (flattened) page: darker than halfway between paper and ink."""
    sample = gray[:: max(1, gray.shape[0] // 256), :: max(1, gray.shape[1] // 256)]
    lo, hi = np.percentile(sample, [1, 90])
    if hi - lo < 30:  # blank
        return np.zeros(gray.shape, dtype=bool)
    return gray < (lo + hi) / 2


def estimate_skew(gray: np.ndarray, max_angle: float = MAX_SKEW) -> float:
    """Degrees (counter-clockwise) the text lines of a greyscale page run at; 0.0 for a page with
    too little ink to tell."""
    ink = ink_pixels(flatten_lighting(gray))
    h, w = ink.shape
    ink = ink[: h // 2 * 2, : w // 2 * 2].reshape(h // 2, 2, w // 2, 2).any(axis=(1, 3))  # half size: 4x less work
    ys, xs = np.nonzero(ink)
    if ys.size < 200:
        return 0.0
    xs = xs - ink.shape[1] / 2.0

    def sharpness(angle: float) -> float:
        rows = np.round(ys + xs * math.tan(math.radians(angle))).astype(np.int64)
        profile = np.bincount(rows - rows.min()).astype(np.float64)
        return float(np.dot(profile, profile))

    def best_of(angles: np.ndarray) -> float:
        scores = np.array([sharpness(a) for a in angles])
        return float(angles[scores >= scores.max() * (1 - 1e-9)].mean())

    coarse = best_of(np.arange(-max_angle, max_angle + 1e-9, COARSE_STEP))
    fine = best_of(np.arange(coarse - COARSE_STEP, coarse + COARSE_STEP + 1e-9, FINE_STEP))
    return float(np.clip(fine, -max_angle, max_angle))


def straighten(page: Page) -> Page:
    """The page as the decoders should read it: evenly lit and straight, with ``page.skew`` set.

    Pages with a text layer are returned as they are (their lines are known, not guessed from the
    pixels). A page whose lighting is even and whose skew rounds to 0 keeps its pixels."""
    if not isinstance(page, Page) or page.lines or page.skew is not None:
        return page  # a text layer, a page straightened already, or a stand-in with no pixels
    gray = np.asarray(page.image.convert("L"))
    angle = round(estimate_skew(gray) / RESOLUTION) * RESOLUTION
    angle = round(angle, 1) + 0.0  # no "-0.0"
    image, relit = page.image, 0.0
    if is_unevenly_lit(gray):
        paper = np.maximum(paper_level(gray), 1.0)
        rgb = np.asarray(image.convert("RGB"), dtype=np.float32) * (255.0 / paper)[..., None]
        image = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))
        relit = round(float(np.abs(np.asarray(image.convert("L"), dtype=np.float32) - gray).mean()), 1)
    if angle:
        rgb = image.convert("RGB")
        paper = tuple(int(v) for v in np.percentile(np.asarray(rgb)[::4, ::4].reshape(-1, 3), 90, axis=0))
        image = rgb.rotate(-angle, resample=Image.BICUBIC, expand=True, fillcolor=paper)
    skew = Straightening(angle, page.width, page.height, relit)
    return replace(page, image=image, skew=skew)
