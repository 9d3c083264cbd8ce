"""Two more probes beside the Semantic Shuffle: occlude words, degrade the page.

- **Occlusion** blanks chosen words (paper colour over their boxes) while the ground truth keeps
  them. A decoder that uses context can recover some; a diffusion decoder can use the words on both
  sides, an AR decoder only those before. :func:`occlude` works on the raster of any page;
  :func:`occlude_pdf` redacts the words in a PDF (text only) and renders the result, so the glyphs
  are truly gone from the file.
- **Degradation** lowers the DPI, blurs, adds noise, re-encodes as JPEG and rotates slightly:
  :func:`degrade` is deterministic per seed and moves the text layer with the pixels.

Each returns a :class:`Perturbed`: the page to decode (ground truth unchanged), and what was done,
which the page carries into the trace (``page.occluded``, ``page.probes``).
"""

from __future__ import annotations

import hashlib
import io
import math
import random
from dataclasses import dataclass, replace

import numpy as np
from PIL import Image, ImageFilter

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits, current
from mudiff_viz.core.types import Box
from mudiff_viz.inputs.page import Page, TextChar, TextLine
from mudiff_viz.inputs.pdf import PDF_LOCK, open_pdf, render_pdf_page, run_worker
from mudiff_viz.probes.pdf_text import occlude_words
from mudiff_viz.probes.shuffle import image_lines

OCCLUDE_PAD = 1.0  # pixels added around a word box before blanking (anti-aliased glyph edges)
MAX_ROTATE = 10.0  # degrees: "a small rotation"


@dataclass
class Word:
    text: str  # "" when the page has no text layer (a word found in the pixels)
    box: Box  # page pixels


@dataclass
class Perturbed:
    page: Page  # what the decoders see; its ground truth is the original's
    changes: dict  # the probe's record (also in page.probes)


# ---- words -------------------------------------------------------------------------------------


def page_words(page: Page) -> list[Word]:
    """The page's words in reading order: from the text layer, else found in the pixels."""
    if page.lines:
        return [Word(text, box) for line in page.lines for text, box in line.words()]
    return [Word("", (float(a), float(line.box[1]), float(b), float(line.box[3])))
            for line in image_lines(page.image) for a, b in line.words]


def word_at(page: Page, x: float, y: float) -> int | None:
    """Index of the word under page pixel (x, y) (a click on the preview), or None."""
    for i, w in enumerate(page_words(page)):
        x0, y0, x1, y1 = w.box
        if x0 - 2 <= x <= x1 + 2 and y0 - 2 <= y <= y1 + 2:
            return i
    return None


def choose_words(n_words: int, words: list[int] | None, fraction: float | None, seed: int) -> list[int]:
    """Word indices to occlude: the given ones, or a seeded random ``fraction`` of all."""
    if (words is None) == (fraction is None):
        raise UserInputError("occlusion needs either word indices or a fraction")
    if words is not None:
        bad = [i for i in words if not 0 <= i < n_words]
        if bad:
            raise UserInputError(f"word {bad[0]} does not exist: the page has {n_words} words")
        return sorted(set(words))
    if not 0.0 <= fraction <= 1.0 or math.isnan(fraction):
        raise UserInputError(f"occlusion fraction must be in [0, 1], got {fraction}")
    k = round(fraction * n_words)
    return sorted(random.Random(f"occlude:{seed}").sample(range(n_words), k))


def paper_colour(image: Image.Image) -> tuple[int, int, int]:
    """The page's background colour: per channel, the 90th percentile (most of a page is paper)."""
    arr = np.asarray(image.convert("RGB"))
    sample = arr[:: max(1, arr.shape[0] // 256), :: max(1, arr.shape[1] // 256)].reshape(-1, 3)
    return tuple(int(v) for v in np.percentile(sample, 90, axis=0))


def _pixel_box(box: Box, width: int, height: int, pad: float) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = box
    return (max(0, math.floor(x0 - pad)), max(0, math.floor(y0 - pad)),
            min(width, math.ceil(x1 + pad)), min(height, math.ceil(y1 + pad)))


# ---- occlusion ---------------------------------------------------------------------------------


def occlude(page: Page, words: list[int] | None = None, fraction: float | None = None, seed: int = 0) -> Perturbed:
    """Blank the chosen words on the page's raster (paper colour over each word box, padded by a
    pixel); everything outside those boxes is untouched and the ground truth keeps the words."""
    all_words = page_words(page)
    chosen = choose_words(len(all_words), words, fraction, seed)
    image = page.image.convert("RGB").copy()
    paper = paper_colour(image)
    occluded = []
    for i in chosen:
        box = _pixel_box(all_words[i].box, image.width, image.height, OCCLUDE_PAD)
        if box[2] > box[0] and box[3] > box[1]:
            image.paste(paper, box)
        occluded.append((tuple(float(v) for v in box), all_words[i].text))
    changes = {"kind": "raster", "words": chosen, "fraction": fraction, "seed": seed, "n_words": len(all_words)}
    return Perturbed(_with(page, image=image, occluded=page.occluded + occluded, probe=("occlude", changes)), changes)


def occlude_pdf(data: bytes, page_index: int = 0, words: list[int] | None = None, fraction: float | None = None,
                seed: int = 0, dpi: float = 150, limits: Limits | None = None, trusted: bool = False,
                source: str = "page.pdf") -> Perturbed:
    """Redact the chosen words from a PDF page (text only: images and line art stay) and render it.

    Word indices refer to the original page's text-layer words in reading order; the returned page
    keeps the original text layer as its ground truth. Uploads are redacted in the isolated worker.
    """
    limits = limits or current()
    original = render_pdf_page(data, page_index, dpi, limits, isolate=not trusted)
    if not original.lines:
        raise UserInputError("this PDF page has no text layer: occlude its rendered image instead")
    page = Page(image=original.image, source=source, page_index=page_index, page_count=original.page_count,
                dpi=original.dpi, lines=original.lines, sha256=hashlib.sha256(data).hexdigest())
    all_words = page_words(page)
    chosen = choose_words(len(all_words), words, fraction, seed)
    scale = 72.0 / original.dpi  # page pixels -> PDF points
    rects = [[v * scale for v in all_words[i].box] for i in chosen]
    if trusted:
        redacted = redact_rects(data, page_index, rects, limits)
    else:
        _, redacted = run_worker(["occlude", str(page_index), ",".join(f"{v:.3f}" for r in rects for v in r) or "-"],
                                 data, limits, "redact the words")
    rendered = render_pdf_page(redacted, page_index, dpi, limits, isolate=not trusted)
    occluded = [(tuple(float(v) for v in all_words[i].box), all_words[i].text) for i in chosen]
    changes = {"kind": "pdf-redaction", "words": chosen, "fraction": fraction, "seed": seed, "n_words": len(all_words)}
    out = _with(page, image=rendered.image, occluded=occluded, probe=("occlude", changes))
    return Perturbed(out, changes)


def redact_rects(data: bytes, page_index: int, rects: list[list[float]], limits: Limits) -> bytes:
    """Remove the words under ``rects`` (PDF points) from one page: their lines are redacted (text
    only; images and line art stay) and the other words written back in place."""
    with PDF_LOCK:
        doc = open_pdf(data, limits)
        try:
            if not 0 <= page_index < doc.page_count:
                raise UserInputError(f"page {page_index + 1} does not exist: the PDF has {doc.page_count} pages")
            occlude_words(doc, doc[page_index], [tuple(r) for r in rects])
            return doc.tobytes(garbage=3, deflate=True)
        finally:
            doc.close()


def parse_fractions(text: str) -> list[float]:
    """``"0,0.1,0.2"`` -> [0.0, 0.1, 0.2], each checked to lie in [0, 1]."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserInputError(f"occlusion fractions must be comma-separated numbers, got {text!r}") from None
    for v in values:
        if not 0.0 <= v <= 1.0:
            raise UserInputError(f"occlusion fraction must be in [0, 1], got {v:g}")
    return sorted(set(values)) or [0.0]


# ---- degradation -------------------------------------------------------------------------------

DEGRADE_KNOBS = ("dpi", "blur", "noise", "jpeg", "rotate")


def parse_degrade(spec: str) -> dict[str, float]:
    """``"dpi=72,blur=1"`` -> {"dpi": 72.0, "blur": 1.0}; unknown knobs and bad numbers: one line."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in DEGRADE_KNOBS:
            raise UserInputError(f"degradation knobs are {', '.join(DEGRADE_KNOBS)} as name=value, got {part!r}")
        try:
            out[key] = float(value)
        except ValueError:
            raise UserInputError(f"degradation {key} must be a number, got {value!r}") from None
    return out


def check_degrade(dpi: float | None, blur: float, noise: float, jpeg: int | None, rotate: float, page_dpi: float) -> None:
    if dpi is not None and not 20 <= dpi <= page_dpi:
        raise UserInputError(f"degraded DPI must be in 20..{page_dpi:g} (the page's own), got {dpi:g}")
    if not 0 <= blur <= 10 or math.isnan(blur):
        raise UserInputError(f"blur radius must be in 0..10 pixels, got {blur:g}")
    if not 0 <= noise <= 100 or math.isnan(noise):
        raise UserInputError(f"noise must be in 0..100 (grey levels, standard deviation), got {noise:g}")
    if jpeg is not None and not 1 <= jpeg <= 95:
        raise UserInputError(f"JPEG quality must be in 1..95, got {jpeg}")
    if not -MAX_ROTATE <= rotate <= MAX_ROTATE or math.isnan(rotate):
        raise UserInputError(f"rotation must be in -{MAX_ROTATE:g}..{MAX_ROTATE:g} degrees, got {rotate:g}")


def degrade(page: Page, dpi: float | None = None, blur: float = 0.0, noise: float = 0.0, jpeg: int | None = None,
            rotate: float = 0.0, seed: int = 0) -> Perturbed:
    """A worse scan of the same page, deterministic per seed: resampled to ``dpi`` (the text layer
    scaled with it), Gaussian ``blur`` (radius, pixels), Gaussian ``noise`` (standard deviation in
    grey levels), ``jpeg`` re-encoding at that quality, ``rotate`` degrees (counter-clockwise, about
    the centre, paper-filled; text-layer boxes rotated and re-boxed)."""
    page_dpi = float(page.dpi or 150.0)
    jpeg = None if jpeg is None else int(jpeg)
    check_degrade(dpi, blur, noise, jpeg, rotate, page_dpi)
    image = page.image.convert("RGB")
    paper = paper_colour(image)
    lines = page.lines
    scale = 1.0
    if dpi is not None and dpi != page_dpi:
        scale = dpi / page_dpi
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))), Image.LANCZOS)
        lines = _map_lines(lines, lambda x, y: (x * scale, y * scale))
    if rotate:
        cx, cy = image.width / 2, image.height / 2
        image = image.rotate(rotate, resample=Image.BICUBIC, center=(cx, cy), fillcolor=paper)
        a = math.radians(rotate)
        cos, sin = math.cos(a), math.sin(a)
        lines = _map_lines(lines, lambda x, y: (cx + (x - cx) * cos + (y - cy) * sin, cy - (x - cx) * sin + (y - cy) * cos))
    if blur:
        image = image.filter(ImageFilter.GaussianBlur(blur))
    if noise:
        arr = np.asarray(image, dtype=np.float32)
        arr = arr + np.random.default_rng(seed).normal(0.0, noise, arr.shape[:2])[..., None]
        image = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    if jpeg is not None:
        buf = io.BytesIO()
        image.save(buf, format="JPEG", quality=jpeg)
        image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    changes = {"dpi": dpi, "blur": blur, "noise": noise, "jpeg": jpeg, "rotate": rotate, "seed": seed, "source_dpi": page_dpi}
    occluded = [(_map_box(b, lambda x, y: (x * scale, y * scale)), t) for b, t in page.occluded]
    out = _with(page, image=image, lines=lines, occluded=occluded, probe=("degrade", changes),
                dpi=round(page_dpi * scale, 3))
    return Perturbed(out, changes)


def _map_box(box: Box, f) -> Box:
    pts = [f(x, y) for x in (box[0], box[2]) for y in (box[1], box[3])]
    return (min(p[0] for p in pts), min(p[1] for p in pts), max(p[0] for p in pts), max(p[1] for p in pts))


def _map_lines(lines: list[TextLine] | None, f) -> list[TextLine] | None:
    if not lines:
        return lines
    return [TextLine(ln.text, _map_box(ln.bbox, f), [TextChar(c.c, _map_box(c.bbox, f)) for c in ln.chars], ln.block)
            for ln in lines]


def _with(page: Page, image: Image.Image, occluded, probe: tuple[str, dict], lines=None, dpi=None) -> Page:
    """The page with new pixels (and, for degradation, moved text layer), recording the probe."""
    return replace(
        page, image=image, lines=page.lines if lines is None else lines, dpi=page.dpi if dpi is None else dpi,
        occluded=list(occluded), probes={**page.probes, probe[0]: probe[1]},
        source=f"{probe[0]}-{page.source}",
    )
