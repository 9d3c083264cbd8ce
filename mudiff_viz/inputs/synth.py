"""Synthetic pages: English prose -> PDF page (PyMuPDF Base-14 fonts) -> image + ground truth.

The corpus is prose that ships with every Python: the ``pydoc_data`` topics and standard-library
docstrings (read with ``ast``, nothing is imported). Documents are split train/validation/test by a
hash of their name, so test text never appears in training.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import random
import re
import sysconfig
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from mudiff_viz.core.limits import current
from mudiff_viz.core.textlayout import merge_paragraphs, wrap
from mudiff_viz.inputs.page import Page
from mudiff_viz.inputs.pdf import render_in_process

# Base-14 fonts by family: (regular, bold). PyMuPDF's short names need no font files.
FONTS = {
    "helvetica": ("helv", "hebo"),
    "times": ("tiro", "tibo"),
    "courier": ("cour", "cobo"),
}
SPLITS = ("train", "val", "test")
PAGE_SIZES = {"letter": (612.0, 792.0), "a4": (595.0, 842.0)}  # what random styles draw from (training, evaluation)
SMALL_PAPER = {"a6": (298.0, 420.0)}  # never drawn: for a short page on purpose (tests that decode a whole page)


@dataclass
class Document:
    name: str
    paragraphs: list[str]


def clean_text(text: str) -> str:
    """Fold to printable ASCII (the nano tokenizer's alphabet) and collapse whitespace."""
    text = unicodedata.normalize("NFKD", text)
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    text = "".join(ch for ch in text if 32 <= ord(ch) < 127 or ch.isspace())
    return re.sub(r"\s+", " ", text).strip()


def _is_prose(par: str) -> bool:
    if len(par) < 30:
        return False
    letters = sum(ch.isalpha() or ch == " " for ch in par)
    return letters / len(par) > 0.8 and not par.startswith((">>>", "..."))


def _paragraphs(raw: str) -> list[str]:
    pars = []
    for block in re.split(r"\n\s*\n", raw):
        lines = block.splitlines()
        if lines and all(ln.startswith(("    ", "\t", ">>>")) for ln in lines if ln.strip()):
            continue  # code examples are not prose
        par = clean_text(block)
        if _is_prose(par):
            pars.append(par)
    return pars


@functools.lru_cache(maxsize=1)
def corpus() -> tuple[Document, ...]:
    """All documents: one per pydoc topic and one per standard-library module (its docstrings)."""
    docs: list[Document] = []
    try:
        from pydoc_data.topics import topics
    except ImportError:  # pragma: no cover - some distributions strip pydoc_data
        topics = {}
    for name in sorted(topics):
        pars = _paragraphs(topics[name])
        if pars:
            docs.append(Document(f"topic:{name}", pars))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")) + sorted(stdlib.glob("*/*.py")):
        rel = path.relative_to(stdlib).as_posix()
        if rel.startswith(("test", "idlelib", "lib2to3", "site-packages", "turtledemo")) or "/test" in rel:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        pars: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    pars.extend(_paragraphs(doc))
        if pars:
            docs.append(Document(f"module:{rel}", pars))
    return tuple(docs)


def split_of(name: str) -> str:
    """Deterministic split of a document name: 80% train, 10% val, 10% test."""
    h = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 10
    return "test" if h == 0 else "val" if h == 1 else "train"


@functools.lru_cache(maxsize=3)
def documents(split: str) -> tuple[Document, ...]:
    """Documents of a split. Held-out splits drop paragraphs that also occur in training documents
    (the standard library repeats some docstrings verbatim), so their text is never trained on."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}")
    docs = [d for d in corpus() if split_of(d.name) == split]
    if split != "train":
        seen = {p for d in corpus() if split_of(d.name) == "train" for p in d.paragraphs}
        docs = [Document(d.name, [p for p in d.paragraphs if p not in seen]) for d in docs]
        docs = [d for d in docs if d.paragraphs]
    return tuple(docs)


@dataclass
class PageStyle:
    font: str = "helvetica"
    size: float = 11.0
    columns: int = 1
    margin: float = 72.0
    paper: str = "letter"
    heading: bool = True
    leading: float = 1.25  # line height as a multiple of the font size
    heading_size: float | None = None  # the heading's points (None: the body's + 4); a title of large type

    @staticmethod
    def random(rng: random.Random, fonts=tuple(FONTS), sizes=(9.0, 14.0)) -> "PageStyle":
        return PageStyle(
            font=rng.choice(list(fonts)),
            size=round(rng.uniform(*sizes) * 2) / 2,
            columns=rng.choice([1, 1, 1, 2]),
            margin=rng.uniform(40, 90),
            paper=rng.choice(list(PAGE_SIZES)),
            heading=rng.random() < 0.6,
            leading=rng.uniform(1.15, 1.45),
        )


@dataclass
class SynthPage:
    """A generated page: the PDF bytes and the lines laid out on it (ground truth)."""

    pdf: bytes
    style: PageStyle
    lines: list[str] = field(default_factory=list)
    doc_names: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def render(self, dpi: float = 150) -> Page:
        """Rasterise in-process (our own PDF is trusted) with the text layer in page pixels."""
        limits = current()
        r = render_in_process(self.pdf, 0, dpi, limits)
        return Page(
            image=r.image, source="synthetic.pdf", page_index=0, page_count=1, dpi=r.dpi,
            sha256=hashlib.sha256(self.pdf).hexdigest(), lines=r.lines,
        )


def make_page(
    paragraphs: list[str],
    style: PageStyle,
    heading: str | None = None,
    font_file: str | None = None,
) -> SynthPage:
    """Lay out a heading and paragraphs on one page until it is full.

    ``font_file`` renders with a TrueType font instead of the Base-14 family (used to report CER
    on a font never seen in training).
    """
    import pymupdf

    regular, bold = FONTS[style.font]
    doc = pymupdf.open()
    pw, ph = {**PAGE_SIZES, **SMALL_PAPER}[style.paper]
    page = doc.new_page(width=pw, height=ph)
    if font_file:
        page.insert_font(fontname="F0", fontfile=font_file)
        regular = bold = "F0"
        font_obj = pymupdf.Font(fontfile=font_file)

        def measure_with(_name: str, size: float):
            return lambda s: font_obj.text_length(s, fontsize=size)
    else:

        def measure_with(name: str, size: float):
            return lambda s: pymupdf.get_text_length(s, fontname=name, fontsize=size)

    laid: list[str] = []
    y = style.margin + style.size
    if heading:
        hsize = style.heading_size or style.size + 4
        for hline in wrap(heading.split(), pw - 2 * style.margin, measure_with(bold, hsize))[:2]:
            page.insert_text((style.margin, y), hline, fontname=bold, fontsize=hsize)
            laid.append(hline)
            y += hsize * style.leading
        y += style.size * style.leading * 0.5
    gutter = 24.0
    col_w = (pw - 2 * style.margin - gutter * (style.columns - 1)) / style.columns
    line_h = style.size * style.leading
    top, bottom = y, ph - style.margin
    measure = measure_with(regular, style.size)
    col = 0
    for par in paragraphs:
        for text_line in wrap(par.split(), col_w, measure):
            if y > bottom:
                col += 1
                y = top
                if col >= style.columns:
                    break
            page.insert_text((style.margin + col * (col_w + gutter), y), text_line, fontname=regular, fontsize=style.size)
            laid.append(text_line)
            y += line_h
        if col >= style.columns:
            break
        y += line_h * 0.5
    pdf = doc.tobytes(garbage=3, deflate=True)
    doc.close()
    return SynthPage(pdf=pdf, style=style, lines=laid)


def random_page(rng: random.Random, split: str = "train", style: PageStyle | None = None, **style_kw) -> SynthPage:
    """A page of consecutive paragraphs from random documents of ``split``."""
    docs = documents(split)
    style = style or PageStyle.random(rng, **style_kw)
    doc = rng.choice(docs)
    start = rng.randrange(len(doc.paragraphs))
    pars = list(doc.paragraphs[start:])
    names = [doc.name]
    while sum(len(p) for p in pars) < 6000:
        more = rng.choice(docs)
        pars.extend(more.paragraphs)
        names.append(more.name)
    pars = merge_paragraphs(pars, rng)
    heading = None
    if style.heading:
        title = doc.name.split(":", 1)[1].replace("/", " ").replace(".py", "").replace("_", " ")
        heading = title.strip().capitalize() or None
    page = make_page(pars, style, heading=heading)
    page.doc_names = names
    return page
