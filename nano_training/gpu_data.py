"""Training regions made on the training device: synthetic pages laid out and drawn with torch.

The same pages ``nano_training.data`` makes with PyMuPDF, without it: a random page style
(``synth.PageStyle.random``'s draws), consecutive paragraphs of a random training document merged
and broken into lines at the fonts' advances by ``mudiff_viz.core.textlayout`` (as ``synth`` does),
a bold heading, one or two columns, cut into text blocks as ``group_blocks`` cuts a page (a
paragraph gap, a column or a heading ends a block; long blocks become near-equal chunks of at most
8 lines; a quarter of them a random run of their lines), each line drawn and cropped by
:mod:`nano_training.atlas` at a random DPI with a page's random damage.

Imports torch only (the atlas, the text layout), so it runs on a machine without PyMuPDF or PIL.
"""

from __future__ import annotations

import gzip
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from mudiff_viz.core.textlayout import merge_paragraphs, wrap
from nano_training.atlas import Damage, GlyphAtlas, render_lines

TEXTS = Path(__file__).resolve().parent.parent / "assets" / "gpu-kit" / "texts.json.gz"
PAGE_SIZES = {"letter": (612.0, 792.0), "a4": (595.0, 842.0)}  # synth.PAGE_SIZES
FAMILIES = ("helvetica", "times", "courier")


def load_texts(path: Path = TEXTS) -> dict[str, list[tuple[str, list[str]]]]:
    """{split: [(document name, paragraphs), ...]} for the train and val splits (atlas_build)."""
    return {k: [(n, p) for n, p in v] for k, v in json.loads(gzip.decompress(Path(path).read_bytes())).items()}


@dataclass
class Region:
    """One text block: its line images (32 x w uint8 on the device, ink high) and their texts.
    Looks like ``nano_training.data.RegionSample`` to the objectives."""

    lines: list[torch.Tensor]
    line_texts: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.line_texts)

    @property
    def width(self) -> int:
        return sum(int(p.shape[1]) for p in self.lines)


class RegionBatch(list):
    """Regions whose line images are already one padded float batch on the device: what
    ``objectives.encode_batch`` takes instead of collating numpy arrays."""

    def __init__(self, regions: list[Region], multiple: int = 64) -> None:
        super().__init__(regions)
        lines = [p for r in regions for p in r.lines]
        w = max(int(p.shape[1]) for p in lines)
        w = -(-w // multiple) * multiple
        dev = lines[0].device
        images = torch.zeros(len(lines), 1, lines[0].shape[0], w, device=dev)
        for i, p in enumerate(lines):
            images[i, 0, :, : p.shape[1]] = p.float() / 255.0
        self.images = images
        self.widths = torch.tensor([int(p.shape[1]) for p in lines], dtype=torch.long, device=dev)


@dataclass
class PageLayout:
    family: str
    size: float
    dpi: float
    heading: list[str]  # bold lines at size + 4
    body: list[str]
    gaps: list[float | None]  # per body line: points from the line above's baseline (None: none above)
    blocks: list[list[int]]  # body line indices per text block
    heading_blocks: list[list[int]]
    leading: float


def chunks(block: list[int], max_lines: int) -> list[list[int]]:
    """``group_blocks``'s near-equal chunks of at most ``max_lines``."""
    n = -(-len(block) // max_lines)
    size, extra = divmod(len(block), n)
    out, start = [], 0
    for k in range(n):
        end = start + size + (1 if k < extra else 0)
        out.append(block[start:end])
        start = end
    return out


def layout_page(atlas: GlyphAtlas, docs: list[tuple[str, list[str]]], rng: random.Random, dpi: float | None = None,
                max_lines: int = 8, max_body_lines: int | None = None) -> PageLayout:
    """A random page as ``synth.random_page`` lays it out (the text only; drawing is separate)."""
    family = rng.choice(list(FAMILIES))
    size = round(rng.uniform(9.0, 14.0) * 2) / 2
    columns = rng.choice([1, 1, 1, 2])
    margin = rng.uniform(40, 90)
    pw, ph = PAGE_SIZES[rng.choice(list(PAGE_SIZES))]
    has_heading = rng.random() < 0.6
    leading = rng.uniform(1.15, 1.45)
    name, paragraphs = rng.choice(docs)
    start = rng.randrange(len(paragraphs))
    pars = list(paragraphs[start:])
    while sum(len(p) for p in pars) < 6000:
        pars.extend(rng.choice(docs)[1])
    pars = merge_paragraphs(pars, rng)
    heading: list[str] = []
    y = margin + size
    if has_heading:
        title = name.split(":", 1)[1].replace("/", " ").replace(".py", "").replace("_", " ").strip().capitalize()
        if title:
            hsize = size + 4
            bold = atlas.face(family, bold=True)
            heading = wrap(title.split(), pw - 2 * margin, lambda s: atlas.text_length(s, bold, hsize))[:2]
            y += len(heading) * hsize * leading + size * leading * 0.5
    regular = atlas.face(family)
    gutter = 24.0
    col_w = (pw - 2 * margin - gutter * (columns - 1)) / columns
    line_h = size * leading
    top, bottom = y, ph - margin
    body: list[str] = []
    gaps: list[float | None] = []
    blocks: list[list[int]] = []
    col, prev_y, full = 0, None, False
    for par in pars:
        block: list[int] = []
        for text_line in wrap(par.split(), col_w, lambda s: atlas.text_length(s, regular, size)):
            if y > bottom:
                col += 1
                y, prev_y = top, None
                if block:
                    blocks.append(block)
                    block = []
                if col >= columns:
                    full = True
                    break
            gap = None if prev_y is None else y - prev_y
            if gap is not None and gap > 1.3 * line_h and block:  # a paragraph gap ends a block
                blocks.append(block)
                block = []
            body.append(text_line)
            gaps.append(gap)
            block.append(len(body) - 1)
            prev_y = y
            y += line_h
        if block:
            blocks.append(block)
        if full or (max_body_lines and len(body) >= max_body_lines):
            break
        y += line_h * 0.5
    if max_body_lines:
        body, gaps = body[:max_body_lines], gaps[:max_body_lines]
        blocks = [[i for i in b if i < max_body_lines] for b in blocks]
        blocks = [b for b in blocks if b]
    hsize = size + 4
    heading_blocks = [list(range(len(heading)))] if hsize / size <= 1.3 else [[i] for i in range(len(heading))]
    return PageLayout(family, size, dpi or rng.uniform(100, 210), heading, body, gaps,
                      [c for b in blocks for c in chunks(b, max_lines)], [b for b in heading_blocks if b], leading)


def draw_page(atlas: GlyphAtlas, page: PageLayout, rng: random.Random, gen: torch.Generator,
              augment: bool = True) -> list[Region]:
    """The page's text blocks as training regions (the heading's blocks first, as they read)."""
    dmg = Damage.draw(gen) if augment else None

    def margins(n: int) -> list[tuple[float, float]]:
        return [(rng.uniform(0.1, 0.5), rng.uniform(0.03, 0.25)) if augment else (0.3, 0.12) for _ in range(n)]

    regions: list[Region] = []
    crops, ref, levels = render_lines(atlas, page.body, atlas.face(page.family), page.size, page.dpi, gen, dmg,
                                      margins(len(page.body)), gaps=page.gaps)
    if page.heading:
        hsize = page.size + 4
        hgaps = [None] + [hsize * page.leading] * (len(page.heading) - 1)
        hcrops, _, _ = render_lines(atlas, page.heading, atlas.face(page.family, bold=True), hsize, page.dpi, gen, dmg,
                                    margins(len(page.heading)), ref_height=ref, levels=levels, gaps=hgaps)
        regions += [Region([hcrops[i] for i in b], [page.heading[i] for i in b]) for b in page.heading_blocks]
    for block in page.blocks:
        if augment and len(block) > 1 and rng.random() < 0.25:  # a run of the block's lines
            a = rng.randrange(len(block))
            block = block[a : rng.randrange(a, len(block)) + 1]
        regions.append(Region([crops[i] for i in block], [page.body[i] for i in block]))
    return regions


class DevicePool:
    """Regions of freshly drawn pages, refreshed a page at a time (``nano_training.data.RegionPool``
    on the device)."""

    def __init__(self, atlas: GlyphAtlas, docs, pages: int, rng: random.Random, gen: torch.Generator,
                 max_body_lines: int | None = None, seconds: float | None = None) -> None:
        """``pages`` pages drawn now, or as many (at least one) as ``seconds`` allow."""
        self.atlas, self.docs, self.rng, self.gen = atlas, docs, rng, gen
        self.max_body_lines = max_body_lines
        self.regions: list[Region] = []
        t0 = time.monotonic()
        self.pages = 0
        while self.pages < pages and not (self.pages and seconds and time.monotonic() - t0 > seconds):
            self.regions.extend(self.page())
            self.pages += 1
        self.cursor = 0

    def page(self) -> list[Region]:
        layout = layout_page(self.atlas, self.docs, self.rng, max_body_lines=self.max_body_lines)
        return draw_page(self.atlas, layout, self.rng, self.gen)

    def refresh(self, pages: int = 1) -> None:
        for _ in range(pages):
            for r in self.page():
                self.regions[self.cursor % len(self.regions)] = r
                self.cursor += 1

    def batches(self, budget: int, n_batches: int) -> list[RegionBatch]:
        """About ``n_batches`` batches of regions of similar width, each at most ``budget`` line-pixel
        columns (``RegionPool.batches``)."""
        picked = sorted((self.rng.choice(self.regions) for _ in range(n_batches * 6)), key=lambda r: r.width)
        out: list[list[Region]] = [[]]
        for r in picked:
            if out[-1] and (len(out[-1]) + 1) * max(r.width, out[-1][-1].width) > budget:
                out.append([])
            out[-1].append(r)
        self.rng.shuffle(out)
        return [RegionBatch(b) for b in out[:n_batches]]


def held_out(atlas: GlyphAtlas, docs, pages: int, seed: int, device, max_body_lines: int | None = None) -> list[Region]:
    """Clean regions of ``pages`` validation pages at 150 DPI (fixed by ``seed``): the held-out loss."""
    rng = random.Random(seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    out: list[Region] = []
    for _ in range(pages):
        layout = layout_page(atlas, docs, rng, dpi=150.0, max_body_lines=max_body_lines)
        out.extend(draw_page(atlas, layout, rng, gen, augment=False))
    return out
