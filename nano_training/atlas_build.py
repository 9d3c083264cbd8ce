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


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m nano_training.atlas_build", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("assets/gpu-kit"))
    args = ap.parse_args(argv)
    for path in (build_atlas(args.out), build_texts(args.out)):
        print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
