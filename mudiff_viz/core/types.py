"""Types every layer shares: what gets decoded (a Region) and page boxes."""

from __future__ import annotations

from dataclasses import dataclass, field

Box = tuple[float, float, float, float]  # page pixels: x0, y0, x1, y1


@dataclass
class Region:
    """What gets decoded: a page-pixel box, plus ground truth when the page has a text layer."""

    bbox: Box
    kind: str = "text"  # text | title | table | formula | layout | page ...
    gt_text: str | None = None
    gt_chars: list[tuple[str, Box]] | None = None  # ground-truth characters with page boxes
    prompt: str | None = None  # task prompt for models that take one (real model)
    meta: dict = field(default_factory=dict)  # backend-specific: line boxes, layout angle, skip ...
