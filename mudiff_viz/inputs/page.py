"""A page ready to decode: its raster and, for PDFs with a text layer, the lines of that layer.

Everything downstream works in *page pixels*: the coordinates of the rendered page image. A PDF's
text layer (points) is scaled by ``dpi / 72`` on the way in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from PIL import Image

from mudiff_viz.core.types import Box


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


def joined_chars(lines: list[TextLine]) -> list[tuple[str, Box]]:
    """The characters of ``lines`` joined as their texts are joined (``"\n"`` between lines, boxed as
    a sliver at the end of the line before), so index i is character i of the joined ground truth."""
    chars: list[tuple[str, Box]] = []
    for k, line in enumerate(lines):
        if k:
            b = lines[k - 1].bbox
            chars.append(("\n", (b[2], b[1], b[2] + 1.0, b[3])))
        chars.extend((c.c, c.bbox) for c in line.chars)
    return chars


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
        }


def union(boxes) -> Box:
    boxes = list(boxes)
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )
