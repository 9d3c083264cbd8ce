"""Training data for the nano pair: synthetic pages -> degraded page images -> text-block samples.

A sample is one text block of a page, cut exactly as at inference: the text-layer lines grouped by
:func:`mudiff_viz.inputs.regions.group_blocks`, each line cropped by :func:`preprocess.crop_line`. Pages
are rendered at random DPI and damaged at random (blur, contrast, noise, JPEG) so scans are not
out of range. Some samples take a random run of a block's lines, so short regions are seen too.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter

from models.nano.preprocess import crop_line, ink_levels, reference_height, to_gray
from mudiff_viz.inputs import synth
from mudiff_viz.inputs.regions import group_blocks


@dataclass
class RegionSample:
    lines: list[np.ndarray]  # per line (LINE_HEIGHT, w) uint8, ink high
    line_texts: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.line_texts)

    @property
    def width(self) -> int:
        return sum(p.shape[1] for p in self.lines)


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


def page_regions(rng: random.Random, split: str = "train", augment: bool = True, dpi: float | None = None,
                 style: synth.PageStyle | None = None, max_lines: int = 8) -> list[RegionSample]:
    """All text-block samples of one random synthetic page."""
    sp = synth.random_page(rng, split, style=style)
    page = sp.render(dpi or rng.uniform(100, 210))
    gray = to_gray(page.image)
    if augment:
        gray = degrade(gray, rng)
    levels = ink_levels(gray)
    boxes = [ln.bbox for ln in page.lines]
    ref = reference_height(gray, boxes, levels)
    crops = []
    for line in page.lines:
        mx = rng.uniform(0.1, 0.5) if augment else 0.3
        my = rng.uniform(0.03, 0.25) if augment else 0.12
        crops.append(crop_line(gray, line.bbox, levels, ref, margin_x=mx, margin_y=my).pixels)
    out = []
    for block in group_blocks(boxes, max_lines):
        if augment and len(block) > 1 and rng.random() < 0.25:  # a run of the block's lines
            a = rng.randrange(len(block))
            b = rng.randrange(a, len(block)) + 1
            block = block[a:b]
        out.append(RegionSample([crops[i] for i in block], [page.lines[i].text for i in block]))
    return out


class RegionPool:
    """A pool of region samples, refreshed a page at a time so the model keeps seeing new text."""

    def __init__(self, rng: random.Random, pages: int, split: str = "train", log=print) -> None:
        self.rng = rng
        self.split = split
        self.regions: list[RegionSample] = []
        for i in range(pages):
            self.regions.extend(page_regions(rng, split))
            if log and (i + 1) % 50 == 0:
                log(f"data: {i + 1}/{pages} pages, {len(self.regions)} regions")
        self.cursor = 0

    def refresh(self, pages: int = 1) -> None:
        """Replace the oldest regions with a new page's."""
        for _ in range(pages):
            for s in page_regions(self.rng, self.split):
                self.regions[self.cursor % len(self.regions)] = s
                self.cursor += 1

    def save(self, path) -> None:
        """Keep the generated samples (npz: line pixels concatenated along x, texts, lines per region)."""
        lines = [p for r in self.regions for p in r.lines]
        np.savez_compressed(
            path,
            pixels=np.concatenate(lines, axis=1),
            widths=np.array([p.shape[1] for p in lines]),
            texts=np.array([t for r in self.regions for t in r.line_texts]),
            n_lines=np.array([len(r.lines) for r in self.regions]),
        )

    @classmethod
    def load(cls, path, rng: random.Random, split: str = "train") -> "RegionPool":
        with np.load(path) as z:  # each z[key] access decompresses: read every array once
            pixels, widths, texts, n_lines = z["pixels"], z["widths"], z["texts"], z["n_lines"]
        pool = cls.__new__(cls)
        pool.rng, pool.split, pool.cursor, pool.regions = rng, split, 0, []
        xs = np.cumsum(np.concatenate([[0], widths]))
        line = 0
        for n in n_lines:
            idx = range(line, line + int(n))
            pool.regions.append(RegionSample([pixels[:, xs[i] : xs[i + 1]].copy() for i in idx], [str(texts[i]) for i in idx]))
            line += int(n)
        return pool

    def batches(self, budget: int, n_batches: int) -> list[list[RegionSample]]:
        """About ``n_batches`` batches of regions of similar size, each at most ``budget`` line-pixel
        columns in all (at least one region)."""
        picked = [self.rng.choice(self.regions) for _ in range(n_batches * 6)]
        picked.sort(key=lambda r: r.width)
        out: list[list[RegionSample]] = [[]]
        for r in picked:
            if out[-1] and (len(out[-1]) + 1) * max(r.width, out[-1][-1].width) > budget:
                out.append([])
            out[-1].append(r)
        self.rng.shuffle(out)
        return out[:n_batches]
