"""Input limits in one place.

Every limit has a default, an environment variable (``MUDIFF_<NAME>``) and can be overridden per
call (the CLI passes its flags through :func:`current`). Public deployments get safe defaults
without configuration.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    max_upload_bytes: int = 50 * 1024 * 1024  # uploaded file size
    max_image_pixels: int = 40_000_000  # decoded raster size (width * height)
    max_pdf_pages: int = 500  # page count of an uploaded PDF
    max_page_points: float = 2000.0  # longest PDF page side in points (27.8 in)
    max_dpi: int = 300  # rasterising DPI
    max_render_pixels: int = 16_000_000  # rendered page cap; DPI is lowered to fit
    max_new_tokens: int = 8192  # per region
    max_decode_seconds: float = 300.0  # wall time per decode request
    pdf_timeout_s: float = 30.0  # subprocess time limit for PDF rendering / text extraction
    pdf_memory_mb: int = 2048  # subprocess address-space limit for PDF work
    max_trace_bytes: int = 64 * 1024 * 1024  # saved trace file size
    max_trace_depth: int = 12  # JSON nesting depth of a trace
    max_align_chars: int = 200_000  # decoded + ground-truth characters of one region aligned character by character
    max_app_disk_bytes: int = 2 * 1024**3  # everything the app writes for visitors (uploaded stores, downloads)
    app_file_max_age_s: float = 3600.0  # age after which the app deletes what it wrote for a visitor

    def replace(self, **changes: object) -> "Limits":
        """A copy with some limits changed (``None`` values are ignored)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


def _from_env() -> Limits:
    values: dict[str, object] = {}
    for field in dataclasses.fields(Limits):
        raw = os.environ.get(f"MUDIFF_{field.name.upper()}")
        if raw is None:
            continue
        cast = float if field.type in ("float", float) else int
        try:
            values[field.name] = cast(raw)
        except ValueError as exc:
            raise ValueError(f"MUDIFF_{field.name.upper()}={raw!r} is not a number") from exc
    return Limits(**values)


def current(**overrides: object) -> Limits:
    """The limits in force: defaults, then environment variables, then ``overrides``."""
    return _from_env().replace(**overrides)
