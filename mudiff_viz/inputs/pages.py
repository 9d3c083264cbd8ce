"""Pages in: load PNG/JPEG/PDF with limits, rasterise PDFs, read the PDF text layer.

Everything downstream works in *page pixels*: the coordinates of the rendered page image. A PDF's
text layer (points) is scaled by ``dpi / 72`` on the way in.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from pathlib import Path

from PIL import Image, ImageOps, JpegImagePlugin, PngImagePlugin

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits, current
from mudiff_viz.inputs.page import Page
from mudiff_viz.inputs.pdf import render_pdf_page

ORIENTATION_TAG = 0x0112  # EXIF Orientation


def sniff_kind(data: bytes) -> str:
    """'pdf', 'png' or 'jpeg' from the file's first bytes (names and extensions are not trusted)."""
    head = data[:1024]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if b"%PDF-" in head:
        return "pdf"
    raise UserInputError("unsupported file: not a PNG, JPEG or PDF")


def read_source(source: str | Path | bytes, limits: Limits) -> tuple[bytes, str]:
    """File bytes and a display name, refusing empty or oversized input."""
    if isinstance(source, (bytes, bytearray)):
        data, name = bytes(source), "upload"
    else:
        path = Path(source)
        if not path.is_file():
            raise UserInputError(f"no such file: {path}")
        size = path.stat().st_size
        if size > limits.max_upload_bytes:
            raise UserInputError(f"file too large: {size} bytes (limit {limits.max_upload_bytes})")
        data, name = path.read_bytes(), path.name
    if not data:
        raise UserInputError("empty file")
    if len(data) > limits.max_upload_bytes:
        raise UserInputError(f"file too large: {len(data)} bytes (limit {limits.max_upload_bytes})")
    return data, name


def load_page(
    source: str | Path | bytes,
    page_index: int = 0,
    dpi: float = 150,
    limits: Limits | None = None,
    isolate: bool = True,
) -> Page:
    """Load one page of a PNG, JPEG or PDF, as an RGB image plus the text layer when there is one.

    PDFs render in the isolated worker unless ``isolate`` is False (only for files we made: the
    bundled samples)."""
    limits = limits or current()
    data, name = read_source(source, limits)
    kind = sniff_kind(data)
    digest = hashlib.sha256(data).hexdigest()
    if kind == "pdf":
        rendered = render_pdf_page(data, page_index, dpi, limits, isolate=isolate)
        return Page(
            image=rendered.image,
            source=name,
            page_index=page_index,
            page_count=rendered.page_count,
            dpi=rendered.dpi,
            sha256=digest,
            lines=rendered.lines or None,
        )
    if page_index != 0:
        raise UserInputError(f"page {page_index + 1} does not exist: an image has one page")  # people count from 1
    image, orientation = open_image(data, kind, limits)
    return Page(image=image, source=name, sha256=digest, exif_orientation=orientation)


def open_image(data: bytes, kind: str, limits: Limits) -> tuple[Image.Image, int | None]:
    """Decode a PNG/JPEG with an explicit format list and a hard pixel cap, turned upright by its
    EXIF orientation (as the release's loaders do: a phone photo tagged 6 is read the right way
    up). Returns the RGB image and the orientation tag it had (None when it had none)."""
    fmt = {"png": "PNG", "jpeg": "JPEG"}[kind]
    size = header_size(data, fmt)
    if size and size[0] * size[1] > limits.max_image_pixels:
        raise UserInputError(too_large(*size, limits))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data), formats=[fmt])
            if img.width * img.height > limits.max_image_pixels:
                raise UserInputError(too_large(img.width, img.height, limits))
            img.load()
            orientation = img.getexif().get(ORIENTATION_TAG)
            orientation = int(orientation) if isinstance(orientation, int) and 1 <= orientation <= 8 else None
            upright = ImageOps.exif_transpose(img) if orientation not in (None, 1) else img
            return upright.convert("RGB"), orientation
    except UserInputError:
        raise
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):  # Pillow's own cap, if ever below ours
        raise UserInputError(f"image too large: the limit is {limits.max_image_pixels / 1e6:g} MP") from None
    except Exception as exc:  # PIL raises many types for broken files
        raise UserInputError(f"cannot read {fmt} image: {type(exc).__name__}: {exc}") from None


HEADER_READERS = {"PNG": PngImagePlugin.PngImageFile, "JPEG": JpegImagePlugin.JpegImageFile}


def header_size(data: bytes, fmt: str) -> tuple[int, int] | None:
    """(width, height) from the file's header, read without decoding a pixel and before Pillow's
    decompression-bomb check (whose message speaks of attacks); None when the header is unreadable
    (the full open then says why)."""
    try:
        with HEADER_READERS[fmt](io.BytesIO(data)) as probe:
            return probe.size
    except Exception:  # a broken header: open_image reports it
        return None


def too_large(width: int, height: int, limits: Limits) -> str:
    """The one line for an image over the pixel cap, in megapixels as cameras count them."""
    return (f"image too large: the image is {width * height / 1e6:.0f} MP; the limit is "
            f"{limits.max_image_pixels / 1e6:g} MP ({width}x{height} pixels)")
