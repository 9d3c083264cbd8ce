"""The layout-detection answer of the MinerU models -> regions on the page.

One element per line: ``<|box_start|>x1 y1 x2 y2<|box_end|><|ref_start|>TYPE<|ref_end|><|rotate_up|>``
with coordinates normalised to 0-1000 over the page. Lines that do not match, boxes outside
0-1000 and empty boxes are skipped (a model can emit anything); reversed corners are swapped.
Each region gets the recognition prompt for its type, or ``meta['skip']`` for types that are not
recognised (pictures, containers), so they are shown but not decoded.
"""

from __future__ import annotations

import re

from models.mineru_common.tasks import prompt_for
from mudiff_viz.core.types import Region

LINE_RE = re.compile(
    r"<\|box_start\|>\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*<\|box_end\|>"
    r"<\|ref_start\|>\s*(\w+?)\s*<\|ref_end\|>(.*)"
)
ANGLES = {"<|rotate_up|>": 0, "<|rotate_right|>": 90, "<|rotate_down|>": 180, "<|rotate_left|>": 270}


def parse_layout(text: str, width: float, height: float) -> list[Region]:
    """Regions in page pixels, in the model's reading order; malformed elements are skipped."""
    regions: list[Region] = []
    for line in re.split(r"\n|(?=<\|box_start\|>)", text):
        m = LINE_RE.search(line)
        if not m:
            continue
        x1, y1, x2, y2 = (int(v) for v in m.group(1, 2, 3, 4))
        if max(x1, y1, x2, y2) > 1000:
            continue
        x1, x2 = sorted((x1, x2))
        y1, y2 = sorted((y1, y2))
        if x1 == x2 or y1 == y2:
            continue
        kind = m.group(5).lower()
        tail = m.group(6)
        angle = next((a for tok, a in ANGLES.items() if tok in tail), 0)
        prompt = prompt_for(kind)
        regions.append(
            Region(
                bbox=(x1 * width / 1000, y1 * height / 1000, x2 * width / 1000, y2 * height / 1000),
                kind=kind,
                prompt=prompt,
                meta={"angle": angle, "layout_index": len(regions), "skip": prompt is None},
            )
        )
    return regions
