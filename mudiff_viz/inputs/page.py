"""A page ready to decode: its raster and, for PDFs with a text layer, the lines of that layer.

Everything downstream works in *page pixels*: the coordinates of the rendered page image. A PDF's
text layer (points) is scaled by ``dpi / 72`` on the way in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from PIL import Image

from mudiff_viz.core.types import Box, union


@dataclass
class TextChar:
    c: str
    bbox: Box


@dataclass
class TextLine:
    """One line of the text layer: its text, box and per-character boxes (page pixels)."""

    text: str
    bbox: Box
    chars: list[TextChar] = field(default_factory=list)
    block: int = 0

    def words(self) -> list[tuple[str, Box]]:
        """Words of the line (split at spaces) with their boxes."""
        out: list[tuple[str, Box]] = []
        current_chars: list[TextChar] = []
        for ch in self.chars + [TextChar(" ", (0, 0, 0, 0))]:
            if ch.c.isspace():
                if current_chars:
                    out.append(("".join(c.c for c in current_chars), union(c.bbox for c in current_chars)))
                current_chars = []
            else:
                current_chars.append(ch)
        return out


@dataclass(frozen=True)
class Straightening:
    """How a page was straightened: its text ran at ``angle`` degrees (counter-clockwise), so it
    was turned by ``-angle`` about its centre; ``width`` x ``height`` is the uploaded image;
    ``relit``: how much flattening its lighting changed it."""

    angle: float
    width: int
    height: int
    relit: float = 0.0  # mean grey levels the relighting changed (0: the lighting was even, left alone)

    def info(self) -> dict:
        """The trace's ``page.skew`` record."""
        return {"angle": self.angle, "width": self.width, "height": self.height, "relit": self.relit}

    def to_upload(self, x: float, y: float, page_w: float, page_h: float) -> tuple[float, float]:
        """A point of the straightened page (``page_w`` x ``page_h``) on the uploaded image."""
        a = math.radians(self.angle)
        dx, dy = x - page_w / 2, y - page_h / 2
        # the upload is the page turned by +angle (counter-clockwise on screen, y pointing down)
        return (self.width / 2 + dx * math.cos(a) + dy * math.sin(a),
                self.height / 2 - dx * math.sin(a) + dy * math.cos(a))


@dataclass
class Page:
    """A page ready to decode: its raster and, for text PDFs, its text layer."""

    image: Image.Image  # RGB
    source: str
    page_index: int = 0
    page_count: int = 1
    dpi: float | None = None
    sha256: str = ""
    lines: list[TextLine] | None = None  # text layer in page pixels; None: no text layer
    exif_orientation: int | None = None  # EXIF Orientation tag (1-8) the image was turned upright by
    occluded: list[tuple[Box, str]] = field(default_factory=list)  # words blanked by the occlusion probe
    probes: dict = field(default_factory=dict)  # what was done to the page (occlude, degrade, shuffle)
    skew: Straightening | None = None  # set when the page was straightened (inputs/scan.py); None: not examined

    @property
    def width(self) -> int:
        return self.image.width

    @property
    def height(self) -> int:
        return self.image.height

    @property
    def text(self) -> str | None:
        """Ground-truth text from the text layer (lines joined by newlines), if there is one."""
        if not self.lines:
            return None
        return "\n".join(line.text for line in self.lines)

    def info(self) -> dict:
        """The ``page`` record of a trace."""
        return {
            "width": self.width,
            "height": self.height,
            "source": self.source,
            "page_index": self.page_index,
            "page_count": self.page_count,
            "dpi": self.dpi,
            "sha256": self.sha256,
            "exif_orientation": self.exif_orientation,
            "occluded": [{"box": [round(v, 1) for v in box], "text": text} for box, text in self.occluded],
            "probes": self.probes,
            "skew": self.skew.info() if self.skew else None,
        }
