"""Editing a PDF's text layer in place: what the Semantic Shuffle and the occlusion probe share.

Words are read line by line from MuPDF's raw text (font, size, colour, baseline and advance box of
each word); a line is removed by a thin redaction band through the middle of its glyphs (text only,
never images or line art: line boxes often overlap, a full-height band would cut the neighbours)
and words are written back with a TextWriter in the same font, or a Base-14 substitute when the
font cannot be reused. MuPDF's own text removal can shift the rest of a line, so a touched line is
always removed whole and rewritten.
"""

from __future__ import annotations

from dataclasses import dataclass

# Base-14 fonts by PostScript name -> PyMuPDF short names (need no font file).
BASE14 = {
    "helvetica": "helv", "helvetica-bold": "hebo", "helvetica-oblique": "heit",
    "helvetica-boldoblique": "hebi", "times-roman": "tiro", "times-bold": "tibo",
    "times-italic": "tiit", "times-bolditalic": "tibi", "courier": "cour", "courier-bold": "cobo",
    "courier-oblique": "coit", "courier-boldoblique": "cobi", "symbol": "symb", "zapfdingbats": "zadb",
}


@dataclass
class PdfWord:
    text: str
    x0: float  # advance box, points
    x1: float
    y: float  # baseline
    font: str  # span font name
    size: float
    flags: int
    color: int


def _fallback_font(flags: int) -> str:
    """Nearest Base-14 face from span flags (italic 2, serif 4, mono 8, bold 16)."""
    family = "cour" if flags & 8 else "tiro" if flags & 4 else "helv"
    bold, italic = bool(flags & 16), bool(flags & 2)
    faces = {"helv": ("helv", "hebo", "heit", "hebi"), "tiro": ("tiro", "tibo", "tiit", "tibi"),
             "cour": ("cour", "cobo", "coit", "cobi")}[family]
    return faces[int(bold) + 2 * int(italic)]


class Fonts:
    """Font objects for a page's span fonts: Base-14 by name, embedded fonts extracted from the file
    (matched by the name MuPDF reports for spans), else a Base-14 substitute."""

    def __init__(self, doc, page) -> None:
        import pymupdf

        self._pymupdf = pymupdf
        self._embedded: dict[str, object] = {}
        for xref, ext, _type, basefont, *_rest in page.get_fonts(full=True):
            if ext in ("n/a", ""):
                continue
            try:
                _name, _ext, _type, buffer = doc.extract_font(xref)
                if buffer:
                    font = pymupdf.Font(fontbuffer=buffer)
                    for alias in (basefont, font.name):
                        self._embedded.setdefault(self._key(alias), font)
            except Exception:  # a broken embedded font: its spans get a substitute
                continue
        self._base14: dict[str, object] = {}

    @staticmethod
    def _plain(name: str) -> str:
        return name.split("+", 1)[1] if "+" in name[:7] else name

    @classmethod
    def _key(cls, name: str) -> str:
        """Spans report the PostScript name ("DejaVuSans", "TimesNewRomanPSMT"), a PDF's BaseFont
        and pymupdf's Font.name may give the full name ("DejaVu Sans Book"): compare loosely."""
        key = "".join(ch for ch in cls._plain(name).lower() if ch.isalnum())
        for suffix in ("psmt", "mt", "book", "regular", "roman", "normal"):
            if key.endswith(suffix) and len(key) > len(suffix) + 2:
                key = key[: -len(suffix)]
        return key

    def _named(self, short: str):
        if short not in self._base14:
            self._base14[short] = self._pymupdf.Font(short)
        return self._base14[short]

    def get(self, name: str, flags: int, text: str) -> tuple[object, bool]:
        """(font, exact) for a word; exact is False when a substitute had to be used."""
        plain = self._plain(name)
        short = BASE14.get(plain.lower())
        font = self._named(short) if short else self._embedded.get(self._key(plain))
        if font is not None and all(font.has_glyph(ord(ch)) for ch in text):
            return font, True
        return self._named(_fallback_font(flags)), False


def page_lines(page) -> list[list[PdfWord]]:
    """Horizontal text lines as word lists, in the order MuPDF reads them (what pdf.text_lines sees)."""
    lines: list[list[PdfWord]] = []
    raw = page.get_text("rawdict", sort=False)
    for block in raw.get("blocks", []):
        if block.get("type") != 0:
            continue
        for line in block.get("lines", []):
            dx, dy = line.get("dir", (1.0, 0.0))
            if abs(dy) > 1e-3 or dx <= 0:
                continue  # rotated or vertical text stays as it is
            words: list[PdfWord] = []
            cur: list[tuple[dict, dict]] = []
            chars = [(span, ch) for span in line.get("spans", []) for ch in span.get("chars", [])]
            for span, ch in chars + [({}, {"c": " "})]:
                if ch["c"].isspace():
                    if cur:
                        s0, c0 = cur[0]
                        words.append(PdfWord(
                            text="".join(c["c"] for _, c in cur), x0=c0["bbox"][0], x1=cur[-1][1]["bbox"][2],
                            y=c0["origin"][1], font=s0.get("font", ""), size=float(s0.get("size", 10.0)),
                            flags=int(s0.get("flags", 0)), color=int(s0.get("color", 0)),
                        ))
                    cur = []
                else:
                    cur.append((span, ch))
            if words:
                lines.append(words)
    return lines


def _redact_rect(words: list[PdfWord]):
    """A thin band through the middle of the glyphs: it covers every glyph's centre but cannot reach
    the glyph boxes of neighbouring lines even at tight leading (line boxes often overlap)."""
    import pymupdf

    size = max(w.size for w in words)
    y = max(w.y for w in words)
    return pymupdf.Rect(words[0].x0, y - 0.6 * size, words[-1].x1, y - 0.15 * size)


def remove_lines(page, lines: list[list[PdfWord]]) -> None:
    """Redact ``lines`` from the page (text only)."""
    import pymupdf

    for ws in lines:
        page.add_redact_annot(_redact_rect(ws))
    page.apply_redactions(
        images=pymupdf.PDF_REDACT_IMAGE_NONE,
        graphics=pymupdf.PDF_REDACT_LINE_ART_NONE,
        text=pymupdf.PDF_REDACT_TEXT_REMOVE,
    )


def write_words(page, placed: list[tuple[PdfWord, object, float, float, str]]) -> None:
    """Write (word, font, x, font size, text) at each word's own baseline, one writer per colour."""
    import pymupdf

    writers: dict[int, object] = {}
    for w, face, x, size, text in placed:
        writer = writers.setdefault(w.color, pymupdf.TextWriter(page.rect))
        writer.append((x, w.y), text, font=face, fontsize=size)
    for color, writer in writers.items():
        rgb = ((color >> 16) & 255, (color >> 8) & 255, color & 255)
        writer.write_text(page, color=tuple(c / 255 for c in rgb))


def occlude_words(doc, page, rects: list[tuple[float, float, float, float]]) -> int:
    """Remove every word whose advance box centre lies in one of ``rects`` (PDF points); the rest
    of each touched line is written back where it was. Returns the number of words removed."""
    if page.rotation:
        page.remove_rotation()

    def hit(w: PdfWord) -> bool:
        cx, cy = (w.x0 + w.x1) / 2, w.y - 0.3 * w.size
        return any(x0 <= cx <= x1 and y0 <= cy <= y1 for x0, y0, x1, y1 in rects)

    lines = [ws for ws in page_lines(page) if any(hit(w) for w in ws)]
    if not lines:
        return 0
    fonts = Fonts(doc, page)  # before redaction, which may drop the page's font resources
    remove_lines(page, lines)
    kept = [w for ws in lines for w in ws if not hit(w)]
    write_words(page, [(w, fonts.get(w.font, w.flags, w.text)[0], w.x0, w.size, w.text) for w in kept])
    return sum(len(ws) for ws in lines) - len(kept)
