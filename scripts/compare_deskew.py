"""Our skew estimate (mudiff_viz/inputs/scan.py, a projection-profile search) against the ``deskew``
package (Hough lines on edges, scikit-image) on phone-like JPEGs of held-out pages.

    pip install deskew   # only for this measurement; the app does not use it
    python scripts/compare_deskew.py [--pages 2] [--out docs/results/scans/deskew-compare.json]

Per angle and page: each method's estimate, its error in degrees and its seconds. Numbers go to
docs/probes.md (Scans and photos).
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ANGLES = (-4.0, -2.5, -1.0, 0.0, 1.0, 2.5, 4.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=2)
    ap.add_argument("--out", default="docs/results/scans/deskew-compare.json")
    args = ap.parse_args(argv)
    import numpy as np
    from PIL import Image

    try:
        from deskew import determine_skew
    except ImportError:
        raise SystemExit("error: this measurement needs the deskew package: pip install deskew")
    from mudiff_viz.inputs import synth
    from mudiff_viz.inputs.photo import photographed
    from mudiff_viz.inputs.scan import estimate_skew

    rows = []
    fonts = list(synth.FONTS)
    for i in range(args.pages):
        style = synth.PageStyle(font=fonts[i % len(fonts)], size=11.0, columns=1, margin=64)
        page = synth.random_page(random.Random(500 + i), "test", style=style).render(150)
        for angle in ANGLES:
            grey = np.asarray(Image.open(io.BytesIO(photographed(page, angle, seed=i))).convert("L"))
            row = {"page": i, "angle": angle}
            for name, fn in (("ours", estimate_skew), ("deskew", lambda g: determine_skew(g))):
                t0 = time.perf_counter()
                got = fn(grey)
                row[name] = None if got is None else round(float(got), 3)
                row[f"{name}_s"] = round(time.perf_counter() - t0, 3)
            rows.append(row)
            print(json.dumps(row), flush=True)

    def err(name: str, r: dict) -> float:
        # deskew reports the angle that straightens the image; ours the page's tilt: compare both signs
        got = r[name]
        return float("inf") if got is None else min(abs(got - r["angle"]), abs(-got - r["angle"]))

    summary = {name: {"mean_abs_error_deg": round(statistics.mean(err(name, r) for r in rows), 3),
                      "max_abs_error_deg": round(max(err(name, r) for r in rows), 3),
                      "median_s": round(statistics.median(r[f"{name}_s"] for r in rows), 3)} for name in ("ours", "deskew")}
    print(json.dumps(summary))
    Path(args.out).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
