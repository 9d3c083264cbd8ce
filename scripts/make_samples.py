"""Regenerate the bundled sample pages in assets/samples from held-out (test split) text.

    python scripts/make_samples.py
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mudiff_viz.inputs import synth  # noqa: E402

OUT = ROOT / "assets" / "samples"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    specs = [
        ("helvetica-page.pdf", synth.PageStyle(font="helvetica", size=11, columns=1, margin=72, heading=True), 11, None),
        ("times-two-columns.pdf", synth.PageStyle(font="times", size=10.5, columns=2, margin=60, heading=True), 23, None),
        ("courier-short.pdf", synth.PageStyle(font="courier", size=11, columns=1, margin=72, heading=True), 7, 900),
    ]
    for name, style, seed, max_chars in specs:
        page = synth.random_page(random.Random(seed), "test", style=style)
        if max_chars:  # a short page: keep the heading and the first paragraphs only
            keep, total = [], 0
            rng = random.Random(seed)
            docs = synth.documents("test")
            doc = rng.choice(docs)
            for par in doc.paragraphs:
                if total + len(par) > max_chars and keep:
                    break
                keep.append(par)
                total += len(par)
            page = synth.make_page(keep, style, heading=doc.name.split(":", 1)[1].replace(".py", "").capitalize())
        (OUT / name).write_bytes(page.pdf)
        print(name, len(page.text), "chars")
    # an image-only "scan": no text layer, light blur and noise
    import numpy as np
    from PIL import Image, ImageFilter

    page = synth.random_page(random.Random(31), "test", style=synth.PageStyle(font="times", size=12, columns=1, margin=80))
    img = page.render(150).image.convert("L").filter(ImageFilter.GaussianBlur(0.6))
    arr = np.asarray(img, dtype=np.float32) + np.random.default_rng(0).normal(0, 6, (img.height, img.width))
    Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).save(OUT / "scan-times.jpg", quality=85)
    (OUT / "scan-times.txt").write_text(page.text + "\n")
    print("scan-times.jpg", len(page.text), "chars")


if __name__ == "__main__":
    main()
