"""The task interface of MinerU models: which prompt goes with which kind of region.

Prompts follow the public release (docs/real-models.md#prompts): the user text after the image. The
layout pass sees the whole page resized to a fixed square; recognition sees a crop of one block.
Which layout types are read, and with which prompt, is the layout parse's (layout.py).
"""

from __future__ import annotations

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.types import Region

SYSTEM_PROMPT = "You are a helpful assistant."
TEXT_PROMPT = "\nText Recognition:"
TABLE_PROMPT = "\nTable Recognition:"
FORMULA_PROMPT = "\nFormula Recognition:"
# The release disagrees with itself on the layout prompt (docs/real-models.md#the-layout-prompt):
# its end-to-end script (at its head) and MinerU2.5's client say "Layout Detection", its HF runner,
# Gradio demo and SGLang client "Layout Analysis". Both are offered; "detection" is the default.
LAYOUT_PROMPTS = {"detection": "\nLayout Detection:", "analysis": "\nLayout Analysis:"}
DEFAULT_LAYOUT_PROMPT = "detection"
LAYOUT_PROMPT = LAYOUT_PROMPTS[DEFAULT_LAYOUT_PROMPT]
LAYOUT_IMAGE_SIZE = (1036, 1036)  # 37 x 37 merged patches = 1369 image tokens
# MinerU-Diffusion's release: tokens per pass of its two-stage parse (docs/real-models.md#the-decoding-loop).
# MinerU2.5's client (mineru-vl-utils 2.0.x) sets no max_new_tokens: generate runs to the model's context.
RELEASE_TASK_TOKENS = {"layout": 2048, "table": 2048, "text": 1024, "formula": 1024}


def page_region(width: float, height: float, gt_text: str | None = None) -> Region:
    """The whole page as one text-recognition region (the default for the real models).

    ``gt_text`` (a PDF's text layer) lets the trace report a page-level CER.
    """
    return Region(bbox=(0.0, 0.0, float(width), float(height)), kind="page", gt_text=gt_text, prompt=TEXT_PROMPT)


def layout_region(width: float, height: float, wording: str = DEFAULT_LAYOUT_PROMPT) -> Region:
    """The whole page for the layout-detection pass, asked with one of the release's two wordings."""
    if wording not in LAYOUT_PROMPTS:
        raise UserInputError(f"layout prompt must be one of {', '.join(LAYOUT_PROMPTS)}, got {wording!r}")
    return Region(bbox=(0.0, 0.0, float(width), float(height)), kind="layout", prompt=LAYOUT_PROMPTS[wording])


TASK_OF_PROMPT = {TEXT_PROMPT: "text", TABLE_PROMPT: "table", FORMULA_PROMPT: "formula",
                  **{p: "layout" for p in LAYOUT_PROMPTS.values()}}


def task_of(prompt: str | None) -> str:
    """The task a region's prompt asks for (text when it has none, as the nano models' regions)."""
    return TASK_OF_PROMPT.get(prompt or TEXT_PROMPT, "text")


TASK_PROMPTS = {"text": TEXT_PROMPT, "table": TABLE_PROMPT, "formula": FORMULA_PROMPT, "layout": LAYOUT_PROMPT}


def task_region(width: float, height: float, task: str) -> Region:
    """The whole page asked with one task's prompt (the layout task sees the page as the layout pass does)."""
    if task not in TASK_PROMPTS:
        raise UserInputError(f"task must be one of {', '.join(TASK_PROMPTS)}, got {task!r}")
    if task == "layout":
        return layout_region(width, height)
    return Region(bbox=(0.0, 0.0, float(width), float(height)), kind=task, prompt=TASK_PROMPTS[task])
