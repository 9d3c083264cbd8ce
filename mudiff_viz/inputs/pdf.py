"""PDF rasterising and text-layer extraction, isolated in a subprocess for untrusted files.

Some PDFs make MuPDF spin or allocate without bound, and some ``get_pixmap`` hangs ignore signals,
so uploads are opened in a child process with a wall-clock timeout and an address-space limit. The
child speaks a tiny protocol on stdout: one JSON header line, then the PNG bytes. Nothing is
pickled. Trusted PDFs (our own synthetic pages) can be rendered in-process (``isolate=False``).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits
from mudiff_viz.inputs.page import TextChar, TextLine

# PyMuPDF is not thread-safe: every call into it goes through this lock.
PDF_LOCK = threading.Lock()


# what a child killed by its address-space limit leaves on stderr
OUT_OF_MEMORY = (b"memoryerror", b"cannot allocate memory", b"failed to map segment", b"bad_alloc", b"out of memory")


@dataclass
class RenderedPage:
    image: Image.Image
    page_count: int
    dpi: float
    lines: list[TextLine]


def is_truncated(data: bytes) -> bool:
    """A PDF ends with ``%%EOF`` (after its cross-reference table); a cut-off download does not."""
    return b"%%EOF" not in data[-2048:]


def open_pdf(data: bytes, limits: Limits):
    """Open PDF bytes with the checks every untrusted file needs; returns a pymupdf Document."""
    import pymupdf

    cut = is_truncated(data)
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:
        raise UserInputError("PDF is damaged or truncated: it cannot be opened" if cut else f"corrupt PDF: {exc}") from None
    if doc.needs_pass or doc.is_encrypted:
        raise UserInputError("PDF is password-protected")
    if doc.page_count == 0:
        # MuPDF rebuilds a file whose end (the cross-reference table) is missing and may find no page
        raise UserInputError("PDF is damaged or truncated: no page could be read from it" if cut else "PDF has no pages")
    if doc.page_count > limits.max_pdf_pages:
        raise UserInputError(f"PDF has {doc.page_count} pages (limit {limits.max_pdf_pages})")
    return doc


def effective_dpi(width_pt: float, height_pt: float, dpi: float, limits: Limits) -> float:
    """The requested DPI, lowered so the rendered page stays under the pixel cap."""
    if not (0 < dpi <= limits.max_dpi):
        raise UserInputError(f"dpi must be in (0, {limits.max_dpi}], got {dpi}")
    pixels = width_pt * height_pt * (dpi / 72.0) ** 2
    if pixels > limits.max_render_pixels:
        dpi = 72.0 * (limits.max_render_pixels / (width_pt * height_pt)) ** 0.5
    return float(dpi)


def text_lines(page, scale: float) -> list[TextLine]:
    """The page's text layer as lines with per-character boxes, scaled to page pixels."""
    lines: list[TextLine] = []
    raw = page.get_text("rawdict", sort=False)
    for block_no, block in enumerate(raw.get("blocks", [])):
        if block.get("type") != 0:
            continue
        for line in block.get("lines", []):
            chars = [
                TextChar(ch["c"], tuple(v * scale for v in ch["bbox"]))
                for span in line.get("spans", [])
                for ch in span.get("chars", [])
            ]
            while chars and chars[-1].c.isspace():
                chars.pop()
            while chars and chars[0].c.isspace():
                chars.pop(0)
            ink = [c for c in chars if not c.c.isspace()]
            if not ink:
                continue
            x0, y0, x1, y1 = (v * scale for v in line["bbox"])
            lines.append(
                TextLine(
                    text="".join(c.c for c in chars),
                    bbox=(min(c.bbox[0] for c in ink), y0, max(c.bbox[2] for c in ink), y1),
                    chars=chars,
                    block=block_no,
                )
            )
    return lines


def render_in_process(data: bytes, page_index: int, dpi: float, limits: Limits) -> RenderedPage:
    """Render one page and read its text layer in this process (trusted input or the child)."""
    with PDF_LOCK:
        doc = open_pdf(data, limits)
        try:
            if not 0 <= page_index < doc.page_count:
                pages = f"{doc.page_count} page" + ("s" if doc.page_count != 1 else "")
                raise UserInputError(f"page {page_index + 1} does not exist: the PDF has {pages}")  # people count from 1
            page = doc[page_index]
            w, h = page.rect.width, page.rect.height
            if max(w, h) > limits.max_page_points:
                raise UserInputError(
                    f"page is {w:.0f}x{h:.0f} pt, larger than the limit of {limits.max_page_points:.0f} pt"
                )
            if w < 1 or h < 1:
                raise UserInputError("page has no area")
            dpi = effective_dpi(w, h, dpi, limits)
            import pymupdf

            pix = page.get_pixmap(matrix=pymupdf.Matrix(dpi / 72.0, dpi / 72.0), alpha=False)
            image = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
            lines = text_lines(page, pix.width / w)
            return RenderedPage(image=image, page_count=doc.page_count, dpi=dpi, lines=lines)
        finally:
            doc.close()


def run_worker(task: list[str], data: bytes, limits: Limits, action: str = "render") -> tuple[dict, bytes]:
    """Run ``python -m mudiff_viz.workers.pdf TASK...`` on ``data`` with the time and memory limits.

    Returns the child's JSON header and its binary payload; a refusal or a crash becomes one
    UserInputError line. ``action`` names the work in messages ("render", "shuffle").
    """
    env = dict(os.environ)
    env["MUDIFF_LIMITS_JSON"] = json.dumps(limits.__dict__)
    # the child imports this package by name: make it findable from any working directory
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    mem = int(limits.pdf_memory_mb) * 1024 * 1024

    def _limit_memory() -> None:  # runs in the child before exec
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))

    try:
        proc = subprocess.run(
            [sys.executable, "-m", "mudiff_viz.workers.pdf", *task],
            input=data,
            capture_output=True,
            timeout=limits.pdf_timeout_s,
            env=env,
            preexec_fn=_limit_memory if sys.platform.startswith("linux") else None,
        )
    except subprocess.TimeoutExpired:
        raise UserInputError(f"PDF took longer than {limits.pdf_timeout_s:.0f} s to {action}") from None
    header, _, payload = proc.stdout.partition(b"\n")
    try:
        meta = json.loads(header or b"{}")
    except json.JSONDecodeError:
        meta = {}
    if "error" in meta:
        raise UserInputError(meta["error"])
    if proc.returncode != 0 or not meta.get("ok"):
        err = proc.stderr.lower()
        if proc.returncode < 0 or any(s in err for s in OUT_OF_MEMORY):
            raise UserInputError(f"PDF needs more memory to {action} than the limit of {limits.pdf_memory_mb} MB allows")
        raise UserInputError(f"corrupt PDF: {action} failed")
    return meta, payload


def render_pdf_page(
    data: bytes, page_index: int, dpi: float, limits: Limits, isolate: bool = True
) -> RenderedPage:
    """Render a page of an untrusted PDF in a child process with time and memory limits."""
    if not isolate:
        return render_in_process(data, page_index, dpi, limits)
    meta, png = run_worker(["render", str(page_index), str(dpi)], data, limits)
    image = Image.open(io.BytesIO(png), formats=["PNG"])
    image.load()
    lines = [
        TextLine(
            text=ln["text"],
            bbox=tuple(ln["bbox"]),
            chars=[TextChar(c, tuple(b)) for c, b in zip(ln["chars"], ln["boxes"])],
            block=ln["block"],
        )
        for ln in meta["lines"]
    ]
    return RenderedPage(image=image.convert("RGB"), page_count=meta["page_count"], dpi=meta["dpi"], lines=lines)
