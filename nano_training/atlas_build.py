"""Build the GPU kit's travelling data here, where PyMuPDF is (the device has none).

    python -m nano_training.atlas_build --out assets/gpu-kit

Writes two files that carry everything the device needs to make training regions
(``nano_training.atlas`` composes them with torch):

- ``atlas.safetensors``: every printable ASCII glyph of the six Base-14 faces the synthetic pages
  use (Helvetica, Times, Courier, regular and bold), rendered by PyMuPDF at 64 px per em as coverage
  (ink = 255), each cropped to its ink columns and packed side by side in one sheet; per glyph its
  column in the sheet, its width, its left edge relative to the pen, and its advance (em, PyMuPDF's
  ``get_text_length``: the widths ``insert_text`` lays text out with, no kerning). One baseline
  row for all.
- ``texts.json.gz``: the train and val splits of ``mudiff_viz.inputs.synth`` (documents and their
  paragraphs). The corpus is read from the running Python's standard library, so it differs between
  Python versions; shipping it fixes the split the device trains on.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from mudiff_viz.inputs import synth

EM = 64  # atlas pixels per em: finer than the largest page rendering trained on (14 pt at 210 DPI: 41)
TOP, BOTTOM = 1.05, 0.35  # em above and below the baseline held by the sheet
CHARS = "".join(chr(c) for c in range(33, 127))  # the space has no ink; its advance is in the table
FACES = [name for family in synth.FONTS.values() for name in family]  # helv hebo tiro tibo cour cobo


def render_face(face: str) -> tuple[np.ndarray, list[int], list[int], list[float]]:
    """One face's glyphs: (sheet rows, packed columns) coverage, and per glyph start, width, left, advance."""
    import pymupdf

    pitch = 3 * EM  # each glyph alone in a 3-em cell, pen at 1 em into it
    doc = pymupdf.open()
    h = int(round((TOP + BOTTOM) * EM))
    base = int(round(TOP * EM))
    page = doc.new_page(width=pitch * len(CHARS), height=h)
    for i, ch in enumerate(CHARS):
        page.insert_text((i * pitch + EM, base), ch, fontname=face, fontsize=EM)
    pix = page.get_pixmap(matrix=pymupdf.Matrix(1, 1), colorspace=pymupdf.csGRAY, alpha=False)
    gray = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width)
    doc.close()
    cover = 255 - gray
    cols, starts, widths, lefts, advances = [], [], [], [], []
    at = 0
    for i, ch in enumerate(CHARS):
        cell = cover[:, i * pitch : (i + 1) * pitch]
        ink = np.flatnonzero(cell.max(0) > 0)
        a, b = (int(ink[0]), int(ink[-1]) + 1) if ink.size else (EM, EM + 1)
        cols.append(cell[:, a:b])
        starts.append(at)
        widths.append(b - a)
        lefts.append(a - EM)
        advances.append(pymupdf.get_text_length(ch, fontname=face, fontsize=1))
        at += b - a
    return np.concatenate(cols, axis=1), starts, widths, lefts, advances


def build_atlas(out: Path) -> Path:
    sheets, meta = [], {"start": [], "width": [], "left": [], "advance": []}
    offset = 0
    for face in FACES:
        sheet, starts, widths, lefts, advances = render_face(face)
        sheets.append(sheet)
        meta["start"].append([s + offset for s in starts])
        meta["width"].append(widths)
        meta["left"].append(lefts)
        meta["advance"].append([pymupdf_space(face)] + advances)  # index 0: the space
        offset += sheet.shape[1]
    tensors = {
        "sheet": torch.from_numpy(np.ascontiguousarray(np.concatenate(sheets, axis=1))),
        "start": torch.tensor(meta["start"], dtype=torch.int32),
        "width": torch.tensor(meta["width"], dtype=torch.int32),
        "left": torch.tensor(meta["left"], dtype=torch.int32),
        "advance": torch.tensor(meta["advance"], dtype=torch.float32),
    }
    out.mkdir(parents=True, exist_ok=True)
    path = out / "atlas.safetensors"
    import pymupdf

    info = {"em": EM, "baseline": int(round(TOP * EM)), "faces": FACES, "chars": " " + CHARS,
            "families": {k: list(v) for k, v in synth.FONTS.items()},
            # the text layer's line box: baseline - ascender * size .. baseline - descender * size
            "ascender": [pymupdf.Font(f).ascender for f in FACES], "descender": [pymupdf.Font(f).descender for f in FACES]}
    save_file(tensors, str(path), metadata={"atlas": json.dumps(info)})
    return path


def pymupdf_space(face: str) -> float:
    import pymupdf

    return pymupdf.get_text_length(" ", fontname=face, fontsize=1)


def build_texts(out: Path) -> Path:
    data = {split: [[d.name, list(d.paragraphs)] for d in synth.documents(split)] for split in ("train", "val")}
    path = out / "texts.json.gz"
    path.write_bytes(gzip.compress(json.dumps(data, separators=(",", ":")).encode(), mtime=0))
    return path


def comparison_figure(path: Path, settings=(("helvetica", 10.0, 150.0), ("times", 11.0, 150.0),
                                           ("courier", 9.0, 100.0)), width: int = 900) -> Path:
    """A PNG for the eye: for each setting, two lines of a held-out page as PyMuPDF + ``crop_line``
    make them, each followed by the same line drawn by the atlas (grey rules between pairs)."""
    import random

    from PIL import Image

    from models.nano.preprocess import crop_line, ink_levels, reference_height, to_gray
    from nano_training.atlas import GlyphAtlas, render_lines

    atlas = GlyphAtlas()
    rows = []
    for family, size, dpi in settings:
        pars = synth.merge_paragraphs(list(synth.documents("test")[5].paragraphs) * 3, random.Random(0))
        page = synth.make_page(pars, synth.PageStyle(font=family, size=size, heading=False)).render(dpi)
        gray = to_gray(page.image)
        levels = ink_levels(gray)
        ref = reference_height(gray, [ln.bbox for ln in page.lines], levels)
        lines = page.lines[0:4]  # the middle two are shown, with their neighbours' ink as on the page
        gaps = [None] + [(b.bbox[3] - a.bbox[3]) * 72 / dpi for a, b in zip(lines, lines[1:])]
        drawn, _, _ = render_lines(atlas, [ln.text for ln in lines], atlas.face(family), size, dpi,
                                   torch.Generator().manual_seed(0), ref_height=ref, gaps=gaps)
        for ln, d in list(zip(lines, drawn))[1:3]:
            for img in (crop_line(gray, ln.bbox, levels, ref).pixels, d.numpy()):
                rows.append(np.pad(img[:, :width], ((0, 2), (0, max(0, width - img.shape[1])))))
            rows.append(np.full((3, width), 96, np.uint8))
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(255 - np.concatenate(rows, 0)).save(path)
    return path


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m nano_training.atlas_build", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("assets/gpu-kit"))
    ap.add_argument("--figure", type=Path, help="also write a PNG comparing PyMuPDF's lines with the atlas's")
    args = ap.parse_args(argv)
    for path in (build_atlas(args.out), build_texts(args.out)):
        print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")
    if args.figure:
        print(f"wrote {comparison_figure(args.figure)}")


if __name__ == "__main__":
    main()
