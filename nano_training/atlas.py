"""Text lines as the nano pair sees them, made with torch from a glyph atlas: no PDF renderer.

The device that trains the pair has no PyMuPDF, so the kit ships every glyph of the training fonts
rendered here (``nano_training.atlas_build``) and this module does what PyMuPDF and
``models.nano.preprocess.crop_line`` do to a line of a synthetic page:

1. lay the glyphs out at their advances (no kerning, as ``insert_text`` does) at 64 px per em,
   with the line's sub-pixel phase on the page;
2. box-filter that down to the page's resolution (``px_per_em`` = font size x DPI / 72): the
   coverage a rasteriser computes, pixelation of low DPIs included;
3. optionally damage it as ``nano_training.data.degrade`` damages a page (blur, contrast, noise,
   JPEG-like block quantisation);
4. crop it as ``crop_line`` does: ink extents at the mid grey level, grown to the page's reference
   ink height, margins in units of the ink height, the integer window resized to 32 px high
   (bilinear with antialiasing, PIL's resize), ink mapped to 1 between the page's paper and ink levels.

Imports torch and safetensors only, so it runs where the training runs (``nano_training.gpu_run``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import safe_open

LINE_HEIGHT = 32  # models.nano.preprocess.LINE_HEIGHT (not imported: that module needs PIL)
MAX_LINE_WIDTH = 2400
ATLAS = Path(__file__).resolve().parent.parent / "assets" / "gpu-kit" / "atlas.safetensors"


@dataclass
class Damage:
    """Scan-like damage of one page (``nano_training.data.degrade``'s draws)."""

    blur: float = 0.0  # Gaussian sigma, page pixels (0: none)
    contrast: tuple[float, float] | None = None  # (lo, hi): grey 0 -> lo, 255 -> hi
    noise: float = 0.0  # Gaussian sigma, grey levels
    jpeg: int = 0  # JPEG-like quality 35-90 (0: none)

    @staticmethod
    def draw(gen: torch.Generator) -> "Damage":
        u = torch.rand(9, generator=gen, device=gen.device).tolist()
        return Damage(
            blur=0.2 + 0.9 * u[1] if u[0] < 0.5 else 0.0,
            contrast=(90 * u[3], 190 + 65 * u[4]) if u[2] < 0.4 else None,
            noise=2 + 16 * u[6] if u[5] < 0.5 else 0.0,
            jpeg=35 + int(55 * u[8]) if u[7] < 0.3 else 0,
        )


class GlyphAtlas:
    """The shipped glyphs of the six Base-14 faces, on one torch device."""

    def __init__(self, path: Path = ATLAS, device: str | torch.device = "cpu") -> None:
        with safe_open(str(path), "pt") as f:
            info = json.loads(f.metadata()["atlas"])
            t = {k: f.get_tensor(k) for k in f.keys()}
        self.device = torch.device(device)
        self.em, self.baseline = int(info["em"]), int(info["baseline"])
        self.faces: list[str] = info["faces"]
        self.families: dict[str, list[str]] = info["families"]
        chars: str = info["chars"]  # index 0 is the space (no ink)
        self.index = {ch: i for i, ch in enumerate(chars)}
        self.unknown = self.index["?"]
        self.sheet = (t["sheet"].float() / 255.0).t().contiguous().to(self.device)  # (sheet columns, rows)
        zero = torch.zeros(len(self.faces), 1, dtype=torch.int32, device="cpu")
        self.start = torch.cat([zero, t["start"]], 1).long()  # glyph 0 = space: width 0
        self.width = torch.cat([zero, t["width"]], 1).long()
        self.left = torch.cat([zero, t["left"]], 1).long()
        self.advance = t["advance"].double()  # (faces, glyphs) em
        self.advance_list = self.advance.tolist()
        self.ascender, self.descender = info["ascender"], info["descender"]  # em, per face
        # the thinnest stem of each face (atlas pixels): the vertical of "l" (across its columns at
        # mid x-height), the bar of "-" (across its rows at its middle column)
        ell, bar = self.index["l"], self.index["-"]
        self.stem = [min(float(self.sheet[self.start[f, ell] : self.start[f, ell] + self.width[f, ell], self.baseline - 17].sum()),
                         float(self.sheet[self.start[f, bar] + self.width[f, bar] // 2].sum()))
                     for f in range(len(self.faces))]

    def face(self, family: str, bold: bool = False) -> int:
        return self.faces.index(self.families[family][1 if bold else 0])

    def ids(self, text: str) -> list[int]:
        return [self.index.get(ch, self.unknown) for ch in text]

    def text_length(self, text: str, face: int, size: float) -> float:
        """Width in points at ``size`` pt: PyMuPDF's ``get_text_length`` for a Base-14 face."""
        adv = self.advance_list[face]
        return sum(adv[i] for i in self.ids(text)) * size

    def coverage(self, texts: list[str], face: int, px_per_em: float, phase_x: float, phase_y: float,
                 extra: float = 0.7) -> tuple[torch.Tensor, float]:
        """Lines of one face and size rendered at the page's resolution: (n, H, W) ink coverage in
        [0, 1], and the baseline's row. Every line starts ``phase_x`` page pixels from the left; the
        strip holds ``extra`` em of paper above and below the atlas rows (room for margins and for
        neighbouring lines). The box filter from 64 px per em to the page's grid is what a
        rasteriser's area coverage gives."""
        em, dev = self.em, self.device
        f = em / px_per_em  # atlas pixels per page pixel
        rows = self.sheet.shape[1]
        pens, glyphs, lines, ends = [], [], [], []
        adv = self.advance_list[face]
        for i, text in enumerate(texts):
            x = phase_x * f
            for g in self.ids(text):
                pens.append(x)
                glyphs.append(g)
                lines.append(i)
                x += adv[g] * em
            ends.append(x)
        width = int(math.ceil((max(ends) + em) / f)) if ends else 1  # page pixels
        wc = int(math.ceil(width * f))
        top = int(round(phase_y * f))
        hc = int(math.ceil((rows + top) / f) * f)
        canvas = torch.zeros(len(texts) * wc, rows, device=dev)
        if glyphs:
            cpu = torch.device("cpu")  # the index arithmetic stays on the host whatever the default device
            g = torch.tensor(glyphs, device=cpu)
            w = self.width[face, g]
            col0 = torch.tensor(pens, dtype=torch.float64, device=cpu).round().long() + self.left[face, g]
            src0 = self.start[face, g]
            reps = torch.repeat_interleave(torch.arange(len(glyphs), device=cpu), w)
            within = torch.arange(int(w.sum()), device=cpu) - torch.repeat_interleave(torch.cumsum(w, 0) - w, w)
            dest = torch.tensor(lines, device=cpu)[reps] * wc + (col0[reps] + within).clamp(0, wc - 1)
            canvas.index_add_(0, dest.to(dev), self.sheet[(src0[reps] + within).to(dev)])
        canvas = canvas.view(len(texts), wc, rows).transpose(1, 2).clamp_(max=1.0)
        k = int(round(f - self.stem[face]))
        if k >= 1:  # stems thinner than a page pixel: a rasteriser's hinting keeps them a pixel wide
            canvas = F.max_pool2d(F.pad(canvas[:, None], (k // 2, k - k // 2, 0, 0)), (1, k + 1), stride=1)[:, 0]
        canvas = F.pad(canvas, (0, 0, top, hc - rows - top))
        out = F.interpolate(canvas[:, None], size=(int(round(hc / f)), width), mode="area")[:, 0]
        pad = int(math.ceil(extra * px_per_em))
        return F.pad(out, (0, 0, pad, pad)), (self.baseline + top) / f + pad


def with_neighbours(cover: torch.Tensor, gaps: list[float | None]) -> torch.Tensor:
    """Each line's strip with the ink of the lines above and below it in its column, as a crop of the
    page has it. ``gaps[i]``: page pixels from line i-1's baseline down to line i's (None: line i
    starts a column or follows a heading or a gap too large to matter)."""
    out = cover.clone()
    h = cover.shape[1]
    for i, gap in enumerate(gaps):
        if gap is None or i == 0:
            continue
        d = int(round(gap))
        if 0 < d < h:
            out[i, : h - d] += cover[i - 1, d:]  # the line above, seen from line i
            out[i - 1, d:] += cover[i, : h - d]  # line i, seen from the line above
    return out.clamp_(max=1.0)


def gaussian_blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """(n, H, W) blurred separably with edge replication (PIL's GaussianBlur, near enough)."""
    r = max(1, int(math.ceil(3 * sigma)))
    k = torch.exp(-0.5 * (torch.arange(-r, r + 1, device=x.device, dtype=x.dtype) / sigma) ** 2)
    k = k / k.sum()
    y = F.pad(x[:, None], (r, r, r, r), mode="replicate")
    y = F.conv2d(y, k.view(1, 1, 1, -1))
    return F.conv2d(y, k.view(1, 1, -1, 1))[:, 0]


_LUMA_Q = torch.tensor([
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
    14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99], dtype=torch.float32).view(8, 8)


def jpeg_like(gray: torch.Tensor, quality: int) -> torch.Tensor:
    """(n, H, W) grey levels through JPEG's luminance path: 8x8 DCT, the standard table scaled by
    ``quality``, rounding, inverse DCT (no chroma, no entropy coding: they change no grey level)."""
    n, h, w = gray.shape
    ph, pw = -h % 8, -w % 8
    x = F.pad(gray[:, None], (0, pw, 0, ph), mode="replicate")[:, 0] - 128.0
    k = torch.arange(8, device=gray.device, dtype=torch.float32)
    d = torch.cos((2 * k[None, :] + 1) * k[:, None] * math.pi / 16) * 0.5
    d[0] /= math.sqrt(2)
    scale = 5000 / quality if quality < 50 else 200 - 2 * quality
    q = ((_LUMA_Q.to(gray.device) * scale + 50) // 100).clamp(min=1)
    blocks = x.view(n, (h + ph) // 8, 8, (w + pw) // 8, 8).transpose(2, 3)
    coef = torch.round(d @ blocks @ d.t() / q) * q
    out = (d.t() @ coef @ d).transpose(2, 3).reshape(n, h + ph, w + pw) + 128.0
    return out[:, :h, :w]


def damage(gray: torch.Tensor, dmg: Damage, gen: torch.Generator) -> torch.Tensor:
    """``nano_training.data.degrade`` on float grey levels (n, H, W): blur, contrast, noise, JPEG."""
    if dmg.blur > 0:
        gray = gaussian_blur(gray, dmg.blur).round()
    if dmg.contrast:
        lo, hi = dmg.contrast
        gray = lo + gray * (hi - lo) / 255.0
    if dmg.noise > 0:
        gray = gray + dmg.noise * torch.randn(gray.shape, generator=gen, device=gen.device).to(gray.device)
    gray = gray.clamp(0, 255).floor()
    if dmg.jpeg:
        gray = jpeg_like(gray, dmg.jpeg).round().clamp(0, 255)
    return gray


def ink_levels(gray: torch.Tensor) -> tuple[float, float]:
    """(paper, ink) grey levels: ``models.nano.preprocess.ink_levels`` (1st and 90th percentiles)."""
    flat = gray.flatten()
    if flat.numel() > 200_000:
        flat = flat[:: flat.numel() // 200_000 + 1]
    lo, hi = torch.quantile(flat.float(), torch.tensor([0.01, 0.90], device=flat.device)).tolist()
    return hi, min(lo, hi - 40)


def ink_box(gray: torch.Tensor, thr: float, window: tuple[int, int, list[int], list[int]]) -> list[list[int]]:
    """Per line: first and past-last inked row and column inside its text-layer box (rows
    ``window[0]:window[1]``, columns ``window[2][i]:window[3][i]``); [0, 0, 0, 0] where it has no ink."""
    r0, r1, c0, c1 = window
    ink = gray[:, r0:r1] < thr
    col = torch.arange(gray.shape[2], device=gray.device)
    inside = (col[None] >= torch.tensor(c0, device=gray.device)[:, None]) & (col[None] < torch.tensor(c1, device=gray.device)[:, None])
    ink &= inside[:, None, :]
    rows, cols = ink.any(2), ink.any(1)

    def extent(m: torch.Tensor, offset: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.arange(m.shape[1], device=m.device)
        first = torch.where(m, idx, m.shape[1]).min(1).values
        last = torch.where(m, idx, -1).max(1).values + 1
        none = ~m.any(1)
        return torch.where(none, 0, first + offset), torch.where(none, 0, last + offset)

    (y0, y1), (x0, x1) = extent(rows, r0), extent(cols, 0)
    return torch.stack([y0, y1, x0, x1], 1).tolist()


def crop_lines(gray: torch.Tensor, window, levels: tuple[float, float], margins: list[tuple[float, float]],
               ref_height: float | None = None) -> tuple[list[torch.Tensor], float | None]:
    """``crop_line`` for each page-resolution line strip (n, H, W) whose text-layer box is
    ``window`` (:func:`ink_box`): (LINE_HEIGHT, w) uint8 images, ink high, and the reference ink
    height used (the median of these lines' unless given). ``margins``: (margin_x, margin_y) per line."""
    paper, ink = levels
    box = ink_box(gray, (paper + ink) / 2, window)
    heights = [b[1] - b[0] for b in box if b[1] > b[0]]
    if ref_height is None and heights:
        ref_height = float(torch.tensor(heights, dtype=torch.float32, device="cpu").median())
    out = []
    h_page = gray.shape[1]
    for i, (ty0, ty1, tx0, tx1) in enumerate(box):
        if ty1 <= ty0:  # a blank box: keep it as it is
            ty0, ty1, tx0, tx1 = window[0], window[1], window[2][i], window[3][i]
        ink_h = ty1 - ty0
        fy0, fy1 = float(ty0), float(ty1)
        if ref_height and ink_h < 0.75 * ref_height:
            grow = ref_height - ink_h
            fy0, fy1, ink_h = fy0 - grow / 2, fy1 + grow / 2, ref_height
        mx, my = margins[i]
        cx0, cx1 = tx0 - mx * ink_h, tx1 + mx * ink_h
        cy0, cy1 = fy0 - my * ink_h, fy1 + my * ink_h
        X0, Y0, X1, Y1 = math.floor(cx0), math.floor(cy0), math.ceil(cx1), math.ceil(cy1)
        pad = (max(0, -X0), max(0, X1 - gray.shape[2]), max(0, -Y0), max(0, Y1 - h_page))
        src = F.pad(gray[i], pad, value=paper) if any(pad) else gray[i]
        crop = src[Y0 + pad[2] : Y1 + pad[2], X0 + pad[0] : X1 + pad[0]]
        out_w = max(8, min(MAX_LINE_WIDTH, int(round((cx1 - cx0) * LINE_HEIGHT / max(1.0, cy1 - cy0)))))
        resized = F.interpolate(crop[None, None], size=(LINE_HEIGHT, out_w), mode="bilinear", align_corners=False,
                                antialias=True)[0, 0].round().clamp(0, 255)
        inked = ((paper - resized) / max(paper - ink, 1.0)).clamp(0, 1)
        out.append((inked * 255).to(torch.uint8))
    return out, ref_height


def render_lines(atlas: GlyphAtlas, texts: list[str], face: int, size: float, dpi: float, gen: torch.Generator,
                 dmg: Damage | None = None, margins: list[tuple[float, float]] | None = None,
                 ref_height: float | None = None, levels: tuple[float, float] | None = None,
                 gaps: list[float | None] | None = None):
    """Lines of one face and size on a page at ``dpi``: the nano pair's (32, w) uint8 line images,
    the reference ink height and the (paper, ink) levels the crops used (pass both on to the other
    lines of the same page, as ``crop_line`` takes them from the whole page).

    ``gaps[i]``: points from line i-1's baseline to line i's where line i-1 sits right above it in
    the same column (its ink shows in line i's crop as on a page). Sub-pixel phases are drawn from
    ``gen``; ``margins`` default to ``crop_line``'s (0.3, 0.12)."""
    px = size * dpi / 72.0
    u = torch.rand(2, generator=gen, device=gen.device).tolist()
    x0 = 2 * px + u[0]
    cover, base = atlas.coverage(texts, face, px, x0, u[1] * atlas.em / px)
    if gaps:
        cover = with_neighbours(cover, [None if g is None else g * dpi / 72.0 for g in gaps])
    gray = 255.0 * (1.0 - cover)
    gray = gray.round() if dmg is None else damage(gray.round(), dmg, gen)
    if levels is None:
        levels = (255.0, 0.0) if dmg is None else ink_levels(gray)
    asc, desc = atlas.ascender[face] * px, -atlas.descender[face] * px
    pad = 0.15 * (asc + desc)
    ends = [x0 + atlas.text_length(t, face, 1.0) * px for t in texts]
    window = (max(0, int(base - asc)), min(gray.shape[1], int(base + desc + 1)),
              [max(0, int(x0 - pad))] * len(texts), [min(gray.shape[2], int(e + pad + 1)) for e in ends])
    crops, ref_height = crop_lines(gray, window, levels, margins or [(0.3, 0.12)] * len(texts), ref_height)
    return crops, ref_height, levels
