"""A rendered page as a phone camera or a cheap scanner hands it over: a tilted, blurred, noisy,
unevenly lit greyscale JPEG with no text layer. Made from our own renders, so the ground truth is
known: the test suite and ``nano_training.evaluate --scans`` read these files as a user's upload."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageFilter

from mudiff_viz.inputs.page import Page


def photographed(page: Page, angle: float = 0.0, blur: float = 0.8, noise: float = 8.0, light: float = 0.35,
                 quality: int = 75, seed: int = 0) -> bytes:
    """JPEG bytes of ``page`` turned ``angle`` degrees counter-clockwise (onto a canvas that holds
    it, white corners), Gaussian ``blur`` (radius, pixels), a lighting gradient that darkens the
    paper by up to ``light`` (a share of its brightness) towards the bottom-right corner, Gaussian
    ``noise`` (standard deviation, grey levels) and JPEG compression at ``quality``."""
    img = page.image.convert("L")
    if angle:
        img = img.rotate(angle, resample=Image.BICUBIC, expand=True, fillcolor=255)
    if blur:
        img = img.filter(ImageFilter.GaussianBlur(blur))
    arr = np.asarray(img, dtype=np.float32)
    h, w = arr.shape
    if light:
        ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
        arr = arr * (1.0 - light * (0.6 * xs / w + 0.4 * ys / h))
    if noise:
        arr = arr + np.random.default_rng(seed).normal(0.0, noise, arr.shape).astype(np.float32)
    buf = io.BytesIO()
    Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()
