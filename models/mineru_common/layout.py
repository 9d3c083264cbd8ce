"""The layout-detection answer of the MinerU models -> regions on the page, as MinerU2.5's client
(mineru-vl-utils) reads it (docs/real-models.md#the-layout-parse).

One element per line: ``<|box_start|>x1 y1 x2 y2<|box_end|><|ref_start|>TYPE<|ref_end|><|rotate_up|>``
with coordinates normalised to 0-1000 over the page. The rules, in order:

1. An element must match exactly: four integers separated by whitespace, with nothing between the
   box tokens and the numbers, and the type directly between the ref tokens. Boxes outside 0-1000
   and empty boxes are skipped; reversed corners are swapped.
2. Types outside the client's block types (``inline_formula``, anything invented) are dropped.
3. ``unknown`` becomes ``image``: shown, never recognised.
4. Near-duplicates (IoU above 0.9 with a block kept earlier) are dropped: the first one stays.
5. A text block lying inside a table box (90 % of its area) is dropped: the table's recognition reads it.
6. A caption lying inside an image box is dropped likewise.
7. ``<|txt_contd_tgt|>`` after an element marks it as continuing the previous block
   (``meta['continues']``): its text joins the previous one without a paragraph break.

Each region gets the recognition prompt for its type, or ``meta['skip']`` for types that are not
recognised (pictures, lists, containers), so they are shown but not decoded.
"""

from __future__ import annotations

import re

from models.mineru_common.tasks import prompt_for
from mudiff_viz.core.types import Region

ELEMENT_RE = re.compile(
    r"<\|box_start\|>(\d+)\s+(\d+)\s+(\d+)\s+(\d+)<\|box_end\|><\|ref_start\|>(\w+?)<\|ref_end\|>(.*?)(?=<\|box_start\|>|$)",
    re.DOTALL,
)
ANGLES = {"<|rotate_up|>": 0, "<|rotate_right|>": 90, "<|rotate_down|>": 180, "<|rotate_left|>": 270}
CONTINUES = "<|txt_contd_tgt|>"
BLOCK_TYPES = frozenset({
    "text", "title", "table", "image", "code", "algorithm", "header", "footer", "page_number", "page_footnote",
    "aside_text", "equation", "equation_block", "ref_text", "list", "phonetic", "table_caption", "image_caption",
    "code_caption", "table_footnote", "image_footnote", "unknown",
    "chart", "image_block", "table_block",  # newer layouts' picture and container types: kept as boxes
})
DUPLICATE_IOU = 0.9
INSIDE = 0.9  # share of a block's area within another's box that makes it "inside"
PICTURES = frozenset({"image", "chart"})


def iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    inter = _intersection(a, b)
    union = _area(a) + _area(b) - inter
    return inter / union if union > 0 else 0.0


def inside(inner: tuple[float, ...], outer: tuple[float, ...]) -> bool:
    """At least INSIDE of ``inner``'s area lies within ``outer``."""
    return _area(inner) > 0 and _intersection(inner, outer) / _area(inner) >= INSIDE


def _area(b) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def _intersection(a, b) -> float:
    return _area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def parse_elements(text: str) -> list[dict]:
    """Rules 1-3: the well-formed elements of known types, boxes in 0-1000 units, in reading order."""
    out = []
    for m in ELEMENT_RE.finditer(text):
        x1, y1, x2, y2 = (int(v) for v in m.group(1, 2, 3, 4))
        if max(x1, y1, x2, y2) > 1000:
            continue
        x1, x2 = sorted((x1, x2))
        y1, y2 = sorted((y1, y2))
        if x1 == x2 or y1 == y2:
            continue
        kind = m.group(5).lower()
        if kind not in BLOCK_TYPES:
            continue
        tail = m.group(6)
        out.append({"box": (x1, y1, x2, y2), "kind": "image" if kind == "unknown" else kind, "model_kind": kind,
                     "angle": next((a for tok, a in ANGLES.items() if tok in tail), 0), "continues": CONTINUES in tail})
    return out


def filter_elements(elements: list[dict]) -> list[dict]:
    """Rules 4-6: near-duplicates, text inside tables, captions inside pictures."""
    kept: list[dict] = []
    for e in elements:
        if not any(iou(e["box"], k["box"]) > DUPLICATE_IOU for k in kept):
            kept.append(e)
    tables = [e["box"] for e in kept if e["kind"] == "table"]
    pictures = [e["box"] for e in kept if e["kind"] in PICTURES]
    return [e for e in kept
            if not (e["kind"] == "text" and any(inside(e["box"], t) for t in tables))
            and not (e["kind"].endswith("_caption") and any(inside(e["box"], p) for p in pictures))]


def parse_layout(text: str, width: float, height: float) -> list[Region]:
    """Regions in page pixels, in the model's reading order (rules above)."""
    regions: list[Region] = []
    for e in filter_elements(parse_elements(text)):
        x1, y1, x2, y2 = e["box"]
        prompt = prompt_for(e["kind"])
        meta = {"angle": e["angle"], "layout_index": len(regions), "skip": prompt is None,
                "continues": e["continues"] and bool(regions)}
        if e["model_kind"] != e["kind"]:
            meta["model_kind"] = e["model_kind"]
        regions.append(Region(bbox=(x1 * width / 1000, y1 * height / 1000, x2 * width / 1000, y2 * height / 1000),
                              kind=e["kind"], prompt=prompt, meta=meta))
    return regions
