"""The page image a player shows: a compact data URL, and the bundled sample a saved trace came from.

A trace stores the page's size and the SHA-256 of its source file, not its pixels. When a trace was
made from one of the bundled samples (or any file in the given folders) the page is found again by
that hash and re-rendered at the trace's DPI, so a saved trace replays on its page with no model.
"""

from __future__ import annotations

import base64
import hashlib
import io
from functools import lru_cache
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "assets" / "samples"
PAGE_SUFFIXES = (".pdf", ".png", ".jpg", ".jpeg")


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


@lru_cache(maxsize=64)
def _sha256(path: str, mtime: float, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def find_source(sha256: str, folders: tuple[Path, ...] = (SAMPLES,)) -> Path | None:
    """A page file in ``folders`` whose bytes hash to ``sha256``."""
    if not sha256:
        return None
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.suffix.lower() in PAGE_SUFFIXES and path.is_file():
                st = path.stat()
                if _sha256(str(path), st.st_mtime, st.st_size) == sha256:
                    return path
    return None


def page_for_trace(page_info: dict, folders: tuple[Path, ...] = (SAMPLES,)) -> Image.Image | None:
    """The rendered page of a trace's ``page`` record, when its source file is in ``folders``."""
    path = find_source(str(page_info.get("sha256") or ""), folders)
    if path is None:
        return None
    from mudiff_viz.core.errors import UserInputError
    from mudiff_viz.inputs.pages import load_page

    try:
        page = load_page(path, page_index=int(page_info.get("page_index") or 0), dpi=float(page_info.get("dpi") or 150))
    except UserInputError:
        return None
    if (page.width, page.height) != (page_info.get("width"), page_info.get("height")):
        return None  # rendered differently: the boxes would not line up
    return page.image
