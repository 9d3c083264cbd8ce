"""The page image under a trace's player: the one it was decoded from, else found again.

A Trace holds no pixels. ``mv.decode`` remembers the page it loaded (for as long as the trace
lives); a saved trace finds its page again when it was made on a bundled sample
(probes/replay.py). Without either the player shows the token boxes on a blank page.
"""

from __future__ import annotations

import weakref

from PIL import Image

from mudiff_viz.core.trace import Trace
from mudiff_viz.probes.replay import page_for_trace
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
