"""The task interface of MinerU models: which prompt goes with which kind of region.

Prompts follow the public release (REFERENCE.md section 1): the user text after the image. The
layout pass sees the whole page resized to a fixed square; recognition sees a crop of one block.
Layout types that are not text (pictures) or that only group other blocks are not recognised.
"""

from __future__ import annotations

from models.base import Region

SYSTEM_PROMPT = "You are a helpful assistant."
TEXT_PROMPT = "\nText Recognition:"
TABLE_PROMPT = "\nTable Recognition:"
FORMULA_PROMPT = "\nFormula Recognition:"
LAYOUT_PROMPT = "\nLayout Detection:"
LAYOUT_IMAGE_SIZE = (1036, 1036)  # 37 x 37 merged patches = 1369 image tokens

PROMPTS_BY_KIND = {
    "table": TABLE_PROMPT,
    "equation": FORMULA_PROMPT,
    "formula": FORMULA_PROMPT,
    "layout": LAYOUT_PROMPT,
}
NOT_RECOGNISED = frozenset({"image", "image_block", "chart", "list", "equation_block", "table_block"})


def prompt_for(kind: str) -> str | None:
    """The recognition prompt for a layout type; None for types that are not recognised."""
    if kind in NOT_RECOGNISED:
        return None
    return PROMPTS_BY_KIND.get(kind, TEXT_PROMPT)


def page_region(width: float, height: float, gt_text: str | None = None) -> Region:
    """The whole page as one text-recognition region (the default for the real models).

    ``gt_text`` (a PDF's text layer) lets the trace report a page-level CER.
    """
    return Region(bbox=(0.0, 0.0, float(width), float(height)), kind="page", gt_text=gt_text, prompt=TEXT_PROMPT)


def layout_region(width: float, height: float) -> Region:
    """The whole page for the layout-detection pass."""
    return Region(bbox=(0.0, 0.0, float(width), float(height)), kind="layout", prompt=LAYOUT_PROMPT)
