"""Training data for the nano models: synthetic pages -> degraded page images -> line samples.

Lines are cut exactly as at inference (:func:`preprocess.crop_line` on text-layer boxes), with
random DPI, blur, noise, contrast and JPEG so renders of scans are not out of range. Batches are
random word spans of lines, bucketed by width so padding stays small.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter

from models.nano.preprocess import crop_line, ink_levels, reference_height, to_gray
from mudiff_viz.inputs import synth


@dataclass
class LineSample:
    pixels: np.ndarray  # (LINE_HEIGHT, w) uint8, ink high
    text: str
    char_x: np.ndarray  # (len(text), 2) float32: each character's x-range in line pixels


def degrade(gray: np.ndarray, rng: random.Random) -> np.ndarray:
    """Scan-like damage: blur, contrast loss, noise, JPEG. Each applied at random."""
    img = Image.fromarray(gray)
    if rng.random() < 0.5:
        img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.2, 1.1)))
    arr = np.asarray(img, dtype=np.float32)
    if rng.random() < 0.4:
        lo, hi = rng.uniform(0, 90), rng.uniform(190, 255)
        arr = lo + arr * (hi - lo) / 255.0
    if rng.random() < 0.5:
        nprng = np.random.default_rng(rng.randrange(1 << 30))
        arr = arr + nprng.normal(0, rng.uniform(2, 18), arr.shape).astype(np.float32)
    arr = np.clip(arr, 0, 255).astype(np.uint8)
    if rng.random() < 0.3:
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="JPEG", quality=rng.randint(35, 90))
        arr = np.asarray(Image.open(buf).convert("L"))
    return arr


def page_samples(rng: random.Random, split: str = "train", augment: bool = True, dpi: float | None = None,
                 style: synth.PageStyle | None = None) -> list[LineSample]:
    """All line samples of one random synthetic page."""
    sp = synth.random_page(rng, split, style=style)
    page = sp.render(dpi or rng.uniform(100, 210))
    gray = to_gray(page.image)
    if augment:
        gray = degrade(gray, rng)
    levels = ink_levels(gray)
    boxes = [ln.bbox for ln in page.lines]
    ref = reference_height(gray, boxes, levels)
    out = []
    for line in page.lines:
        mx = rng.uniform(0.1, 0.5) if augment else 0.3
        my = rng.uniform(0.03, 0.25) if augment else 0.12
        crop = crop_line(gray, line.bbox, levels, ref, margin_x=mx, margin_y=my)
        xs = np.array([[c.bbox[0], c.bbox[2]] for c in line.chars], dtype=np.float32)
        out.append(LineSample(crop.pixels, line.text, (xs - crop.x0) * crop.scale))
    return out


def random_span(sample: LineSample, rng: random.Random, max_chars: int) -> tuple[np.ndarray, str]:
    """A random run of whole words of at most ``max_chars`` characters (the whole line if it fits)."""
    text = sample.text
    if len(text) <= max_chars:
        return sample.pixels, text
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == " "]
    for _ in range(8):
        s = rng.choice(starts)
        ends = [i for i, ch in enumerate(text) if ch == " " and s < i <= s + max_chars]
        if ends:
            e = rng.choice(ends)
            break
    else:
        s, e = 0, max_chars
    # cut in the middle of the spaces around the span
    left = (sample.char_x[s - 1, 0] + sample.char_x[s - 1, 1]) / 2 if s > 0 else 0
    right = (sample.char_x[e, 0] + sample.char_x[e, 1]) / 2 if e < len(text) else sample.pixels.shape[1]
    pix = sample.pixels[:, int(max(0, left)) : int(min(sample.pixels.shape[1], right + 1))]
    pad_l, pad_r = rng.randint(0, 8), rng.randint(0, 8)
    pix = np.pad(pix, ((0, 0), (pad_l, pad_r)))
    return pix, text[s:e].strip()


class LinePool:
    """A pool of line samples, refreshed a page at a time so the model keeps seeing new text."""

    def __init__(self, rng: random.Random, pages: int, split: str = "train", log=print) -> None:
        self.rng = rng
        self.split = split
        self.lines: list[LineSample] = []
        for i in range(pages):
            self.lines.extend(page_samples(rng, split))
            if log and (i + 1) % 100 == 0:
                log(f"data: {i + 1}/{pages} pages, {len(self.lines)} lines")
        self.cursor = 0

    def refresh(self, pages: int = 1) -> None:
        """Replace the oldest lines with a new page's."""
        for _ in range(pages):
            new = page_samples(self.rng, self.split)
            for s in new:
                self.lines[self.cursor % len(self.lines)] = s
                self.cursor += 1

    def save(self, path) -> None:
        """Keep the generated lines (npz: pixels concatenated along x, texts, character boxes)."""
        np.savez_compressed(
            path,
            pixels=np.concatenate([s.pixels for s in self.lines], axis=1),
            widths=np.array([s.pixels.shape[1] for s in self.lines]),
            texts=np.array([s.text for s in self.lines]),
            char_x=np.concatenate([s.char_x for s in self.lines]),
        )

    @classmethod
    def load(cls, path, rng: random.Random) -> "LinePool":
        with np.load(path) as z:  # each z[key] access decompresses: read every array once
            pixels, widths, texts, char_x = z["pixels"], z["widths"], z["texts"], z["char_x"]
        pool = cls.__new__(cls)
        pool.rng, pool.split, pool.cursor, pool.lines = rng, "train", 0, []
        xs = np.cumsum(np.concatenate([[0], widths]))
        cs = np.cumsum(np.concatenate([[0], [len(t) for t in texts]]))
        for i, text in enumerate(texts):
            pool.lines.append(LineSample(pixels[:, xs[i] : xs[i + 1]].copy(), str(text), char_x[cs[i] : cs[i + 1]]))
        return pool

    def batches(self, batch_size: int, n_batches: int, max_chars: int) -> list[tuple[list[np.ndarray], list[str]]]:
        """``n_batches`` batches of spans, bucketed by width."""
        spans = [random_span(self.rng.choice(self.lines), self.rng, max_chars) for _ in range(batch_size * n_batches)]
        spans = [s for s in spans if s[1]]
        spans.sort(key=lambda s: s[0].shape[1])
        out = [spans[i : i + batch_size] for i in range(0, len(spans), batch_size)]
        self.rng.shuffle(out)
        return [([p for p, _ in b], [t for _, t in b]) for b in out if b]

