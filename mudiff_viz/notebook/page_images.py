"""The page image under a trace's player: the one it was decoded from, else found again.

A Trace holds no pixels. ``mv.decode`` remembers the page it loaded (for as long as the trace
lives); a saved trace finds its page again when it was made on a bundled sample
(probes/replay.py). Without either the player shows the token boxes on a blank page.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

from PIL import Image

from mudiff_viz.core.trace import Trace
from mudiff_viz.probes.replay import page_for_trace
from mudiff_viz.views.animation import AnimationOptions
from mudiff_viz.views.animation import save_gif as write_gif
from mudiff_viz.views.animation import save_mp4 as write_mp4
from mudiff_viz.views.page_image import image_data_url

_images: dict[int, Image.Image] = {}


def remember(trace: Trace, image: Image.Image) -> None:
    key = id(trace)
    _images[key] = image
    weakref.finalize(trace, _images.pop, key, None)


def image_for(trace: Trace) -> Image.Image | None:
    return _images.get(id(trace)) or page_for_trace(trace.page)


def data_url(trace: Trace) -> str | None:
    image = image_for(trace)
    return image_data_url(image) if image is not None else None


def save_gif(trace: Trace, path: str | Path, **options: Any) -> int:
    """``trace.save_gif(path, width=960, fps=6, clock="forward")``: over the page it was decoded from."""
    return write_gif(trace, path, image_for(trace), AnimationOptions(**options))


def save_mp4(trace: Trace, path: str | Path, **options: Any) -> int:
    """``trace.save_mp4(path, ...)``: as :func:`save_gif`, an H.264 video."""
    return write_mp4(trace, path, image_for(trace), AnimationOptions(**options))
