"""``mv.from_release``: what the MinerU-Diffusion release's ``generate`` returned, as a Trace that plays.

The release keeps each token's commit forward (``step_map``) but no guesses, so the trace shows
commits and no ghosts (docs/real-models.md#playing-the-releases-own-output).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.release_import import load_tokenizer, release_output, release_trace
from mudiff_viz.inputs.page import Page
from mudiff_viz.inputs.pages import load_page
from mudiff_viz.notebook import page_images


def _plain(value: Any) -> Any:
    """A tensor or array as nested lists (``generate`` returns tensors); lists pass through."""
    return value.tolist() if hasattr(value, "tolist") else value


def as_page(image: str | Path | bytes | Page | Image.Image) -> Page:
    """The page the release read: a file (PNG, JPEG, PDF's first page), a loaded Page or a PIL image."""
    if isinstance(image, Page):
        return image
    if isinstance(image, Image.Image):
        return Page(image=image.convert("RGB"), source="image")
    if isinstance(image, (str, Path, bytes, bytearray)):
        return load_page(image)
    raise UserInputError(f"image must be a file path, bytes, a PIL image or a Page, got {type(image).__name__}")


def from_release(tokens: Any, step_map: Any, *, image: str | Path | bytes | Page | Image.Image,
                 tokenizer: str | Path, block_length: int = 32, step_time: Any = None,
                 threshold: float | None = None, denoising_steps: int | None = None, task: str = "text",
                 stop_id: int | None = None) -> Trace:
    """A Trace of the release's own decode: ``tokens``, ``step_map`` and ``step_time`` as its
    ``generate`` returned them (tensors or lists, one row), the page ``image`` it read, the
    checkpoint folder holding ``tokenizer.json``, and the settings it ran with. Commits only."""
    data = {"tokens": _plain(tokens), "step_map": _plain(step_map), "block_length": block_length, "task": task}
    for key, value in (("step_time", step_time), ("threshold", threshold), ("denoising_steps", denoising_steps),
                       ("stop_id", stop_id)):
        if value is not None:
            data[key] = _plain(value)
    page = as_page(image)
    trace = release_trace(release_output(data), load_tokenizer(tokenizer), page)
    page_images.remember(trace, page.image)
    return trace
