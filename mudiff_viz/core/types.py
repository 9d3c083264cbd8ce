"""Types every layer shares: what gets decoded (a Region, cut from the page by a RegionUnit) and page boxes."""

from __future__ import annotations

from dataclasses import dataclass, field

Box = tuple[float, float, float, float]  # page pixels: x0, y0, x1, y1


def union(boxes) -> Box:
    """The smallest box holding all of ``boxes``."""
    boxes = list(boxes)
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def joined_chars(lines) -> list[tuple[str, Box]]:
    """The characters of text-layer ``lines`` (each with a ``bbox`` and ``chars`` that have ``c`` and
    ``bbox``) joined as their texts are joined (``"\n"`` between lines, boxed as a sliver at the
    end of the line before), so index i is character i of the joined ground truth."""
    chars: list[tuple[str, Box]] = []
    for k, line in enumerate(lines):
        if k:
            b = lines[k - 1].bbox
            chars.append(("\n", (b[2], b[1], b[2] + 1.0, b[3])))
        chars.extend((c.c, c.bbox) for c in line.chars)
    return chars


@dataclass
class Region:
    """What gets decoded: a page-pixel box, plus ground truth when the page has a text layer."""

    bbox: Box
    kind: str = "text"  # text | title | table | formula | layout | page ...
    gt_text: str | None = None
    gt_chars: list[tuple[str, Box]] | None = None  # ground-truth characters with page boxes
    prompt: str | None = None  # task prompt for models that take one (real model)
    meta: dict = field(default_factory=dict)  # backend-specific: line boxes, layout angle, skip ...


@dataclass(frozen=True)
class RegionUnit:
    """How a model wants a page cut into regions, which mudiff_viz.inputs finds for it: ``"line"``
    (one text line each) or ``"block"`` (text blocks of at most ``max_lines`` lines)."""

    kind: str
    max_lines: int = 1
