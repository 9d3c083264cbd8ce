"""The page image a player shows: a compact data URL of the page under its token boxes."""

from __future__ import annotations

import base64
import io

from PIL import Image


def image_data_url(image: Image.Image, max_side: int = 1400, quality: int = 80) -> str:
    """A JPEG data URL of the page, downscaled so its longest side is at most ``max_side`` pixels.

    The player draws it under an SVG whose coordinates are the page's own pixels, so any scale works.
    """
    img = image.convert("RGB")
    scale = max_side / max(img.size)
    if scale < 1:
        img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))), Image.LANCZOS)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=quality, optimize=True)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
