"""The layout-detection answer of the MinerU models -> regions on the page, under one of two rule
sets (docs/real-models.md#the-layout-parse):

- ``mineru-vl-utils`` (the default): as MinerU2.5's client, mineru-vl-utils 2.0.7, parses it;
- ``release``: as the MinerU-Diffusion release's end-to-end script (scripts/run_end2end.py) does.

An element: ``<|box_start|>x1 y1 x2 y2<|box_end|><|ref_start|>TYPE<|ref_end|><|rotate_up|>`` with
coordinates normalised to 0-1000 over the page. Both rule sets skip boxes outside 0-1000 and empty
boxes, and swap reversed corners.

mineru-vl-utils 2.0.7, in order:

1. Elements are found anywhere in the answer (several per line). Four integers apart by whitespace,
   nothing else between the box tokens; the type directly between the ref tokens.
2. ``unknown`` becomes ``image`` (shown, never read); ``inline_formula`` and types outside its 31
   block types are dropped.
3. The angle is the rotation tag directly after ``<|ref_end|>``; without one it is None (no turn).
4. ``txt_contd_tgt`` after an element marks a ``text`` block (only text) as continuing the
   previous text block (``meta['continues']``).
5. Near-duplicates: a block whose IoU with a block kept earlier *of the same type and angle* is
   above 0.9 is dropped. Blocks of other types never swallow each other (a list keeps its items).
6. A ``text``, ``equation`` or ``equation_block`` covered at least 90 % by a table is dropped: the
   table's recognition reads it.
7. An ``image_caption`` covered at least 90 % by an image, chart or image_block is dropped.
8. An image covered at least 90 % by a table is absorbed by it and dropped.

Pictures (image, chart), lists, equation_block and image_block are shown but not read
(``meta['skip']``); every other type is read with its task's prompt.

The release's script: one element per line (the line must start with it); any type is kept as
written (``inline_formula``, ``unknown`` and invented types too); the angle is any rotation tag
after the type; no duplicate, table, caption or continuation rule. It reads everything but
``image`` and ``equation_block``.
"""

from __future__ import annotations

import math
import re

from models.mineru_common.tasks import FORMULA_PROMPT, TABLE_PROMPT, TEXT_PROMPT
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.types import Region

LAYOUT_RULES = ("mineru-vl-utils", "release")
DEFAULT_LAYOUT_RULES = "mineru-vl-utils"

_BOX = r"<\|box_start\|>(\d+)\s+(\d+)\s+(\d+)\s+(\d+)<\|box_end\|>"
_TYPE = r"<\|ref_start\|>(\w+?)<\|ref_end\|>"
_ROTATION = r"(<\|rotate_(?:up|right|down|left)\|>)?"
# mineru-vl-utils: anywhere, the rotation tag only right after the type, the rest up to the next box
CLIENT_ELEMENT_RE = re.compile(_BOX + _TYPE + _ROTATION + r"(.*?)(?=<\|box_start\|>|$)", re.DOTALL)
# the release's script: one element per (stripped) line, the rest of the line is its tail
RELEASE_LINE_RE = re.compile("^" + _BOX + _TYPE + r"(.*)$")

ANGLES = {"<|rotate_up|>": 0, "<|rotate_right|>": 90, "<|rotate_down|>": 180, "<|rotate_left|>": 270}
CONTINUES = "txt_contd_tgt"
BLOCK_TYPES = frozenset({  # mineru-vl-utils 2.0.7's block types
    "text", "title", "doc_title", "paragraph_title", "table", "equation", "formula_number", "code", "algorithm",
    "aside_text", "ref_text", "index", "phonetic", "list_item",
    "caption", "table_caption", "image_caption", "code_caption", "footnote", "table_footnote", "image_footnote",
    "header", "footer", "page_number", "page_footnote",
    "image", "chart",
    "list", "image_block", "equation_block",
    "unknown",
})
DUPLICATE_IOU = 0.9  # above: a near-duplicate of a kept block of the same type and angle
INSIDE = 0.9  # share of a block's area within another's box that makes it "inside" (at least)
TABLE_INTERNAL = frozenset({"text", "equation", "equation_block"})
CAPTION_CONTAINERS = frozenset({"image", "chart", "image_block"})
CLIENT_SKIPS = frozenset({"image", "chart", "list", "equation_block", "image_block"})
RELEASE_SKIPS = frozenset({"image", "equation_block"})
BLOCK_PROMPTS = {"table": TABLE_PROMPT, "equation": FORMULA_PROMPT}  # both: any other type is read as text


def check_rules(rules: str) -> str:
    if rules not in LAYOUT_RULES:
        raise UserInputError(f"layout rules must be one of {', '.join(LAYOUT_RULES)}, got {rules!r}")
    return rules


def iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    inter = _intersection(a, b)
    union = math.fsum((_area(a), _area(b), -inter))
    return inter / union if union > 0 else 0.0


def covered(inner: tuple[float, ...], outer: tuple[float, ...]) -> float:
    """The share of ``inner``'s area that lies within ``outer`` (0 for an empty ``inner``)."""
    return _intersection(inner, outer) / _area(inner) if _area(inner) > 0 else 0.0


def inside(inner: tuple[float, ...], outer: tuple[float, ...]) -> bool:
    """At least INSIDE of ``inner``'s area lies within ``outer``."""
    return covered(inner, outer) >= INSIDE


def _area(b) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def _intersection(a, b) -> float:
    return _area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def _box(coords) -> tuple[int, int, int, int] | None:
    x1, y1, x2, y2 = (int(v) for v in coords)
    if max(x1, y1, x2, y2) > 1000:
        return None
    x1, x2 = sorted((x1, x2))
    y1, y2 = sorted((y1, y2))
    return None if x1 == x2 or y1 == y2 else (x1, y1, x2, y2)


def client_elements(text: str) -> list[dict]:
    """Rules 1-4: the well-formed elements of known types, boxes in 0-1000 units, in reading order."""
    out = []
    for m in CLIENT_ELEMENT_RE.finditer(text):
        box = _box(m.group(1, 2, 3, 4))
        model_kind = m.group(5).lower()
        kind = "image" if model_kind == "unknown" else model_kind
        if box is None or kind == "inline_formula" or kind not in BLOCK_TYPES:
            continue
        out.append({"box": box, "kind": kind, "model_kind": model_kind, "angle": ANGLES.get(m.group(6) or ""),
                    "continues": kind == "text" and CONTINUES in m.group(7)})
    return out


def release_elements(text: str) -> list[dict]:
    """The release script's parse: an element at the start of each line, any type, no filter."""
    out = []
    for line in text.splitlines():
        m = RELEASE_LINE_RE.match(line.strip())
        box = _box(m.group(1, 2, 3, 4)) if m else None
        if box is None:
            continue
        kind, tail = m.group(5).lower(), m.group(6)
        out.append({"box": box, "kind": kind, "model_kind": kind, "continues": False,
                    "angle": next((a for tag, a in ANGLES.items() if tag in tail), None)})
    return out


def unit(element: dict) -> tuple[float, ...]:
    """An element's box in page units (0-1), where mineru-vl-utils compares boxes: its float
    rounding decides a tie at exactly 0.9 as it does there."""
    return tuple(v / 1000.0 for v in element["box"])


def deduplicate(elements: list[dict]) -> list[dict]:
    """Rule 5: drop a block whose IoU with a kept block of the same type and angle is above 0.9."""
    kept: list[dict] = []
    for e in elements:
        if not any(k["kind"] == e["kind"] and k["angle"] == e["angle"] and iou(unit(e), unit(k)) > DUPLICATE_IOU
                   for k in kept):
            kept.append(e)
    return kept


def drop_covered(elements: list[dict], kinds: frozenset[str], containers: frozenset[str]) -> list[dict]:
    """Drop the blocks of ``kinds`` lying inside another block of ``containers``."""
    boxes = [(i, unit(e)) for i, e in enumerate(elements) if e["kind"] in containers]
    return [e for i, e in enumerate(elements)
            if not (e["kind"] in kinds and any(j != i and inside(unit(e), b) for j, b in boxes))]


def filter_elements(elements: list[dict]) -> list[dict]:
    """Rules 5-8, in mineru-vl-utils' order."""
    kept = deduplicate(elements)
    kept = drop_covered(kept, TABLE_INTERNAL, frozenset({"table"}))
    kept = drop_covered(kept, frozenset({"image_caption"}), CAPTION_CONTAINERS)
    return drop_covered(kept, frozenset({"image"}), frozenset({"table"}))


def read_prompt(kind: str, rules: str) -> str | None:
    """The recognition prompt of a block under ``rules``; None for blocks shown but not read."""
    if kind in (CLIENT_SKIPS if rules == "mineru-vl-utils" else RELEASE_SKIPS):
        return None
    return BLOCK_PROMPTS.get(kind, TEXT_PROMPT)


def parse_layout(text: str, width: float, height: float, rules: str = DEFAULT_LAYOUT_RULES) -> list[Region]:
    """Regions in page pixels, in the model's reading order, under ``rules`` (see above)."""
    check_rules(rules)
    elements = filter_elements(client_elements(text)) if rules == "mineru-vl-utils" else release_elements(text)
    regions: list[Region] = []
    for e in elements:
        x1, y1, x2, y2 = e["box"]
        prompt = read_prompt(e["kind"], rules)
        meta = {"angle": e["angle"], "layout_index": len(regions), "skip": prompt is None,
                "continues": e["continues"]}
        if e["model_kind"] != e["kind"]:
            meta["model_kind"] = e["model_kind"]
        regions.append(Region(bbox=(x1 * width / 1000, y1 * height / 1000, x2 * width / 1000, y2 * height / 1000),
                              kind=e["kind"], prompt=prompt, meta=meta))
    return regions
