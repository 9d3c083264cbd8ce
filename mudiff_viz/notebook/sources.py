"""What ``mv.decode`` accepts as a page: a path, a bundled sample's name, bytes or a PIL image.

Everything becomes what the loaders already take (a path or bytes), so the limits and the isolated
PDF rendering apply as they do for the CLI and the app.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Union

from PIL import Image

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.probes.replay import PAGE_SUFFIXES, SAMPLES

Source = Union[str, Path, bytes, bytearray, Image.Image]


def samples() -> list[str]:
    """The bundled sample pages' file names (assets/samples)."""
    return sorted(p.name for p in SAMPLES.iterdir() if p.suffix.lower() in PAGE_SUFFIXES)


def resolve(source: Source) -> str | bytes:
    """A path (str) or file bytes for the loaders; a sample may be named with or without its suffix."""
    if isinstance(source, Image.Image):
        buf = io.BytesIO()
        source.convert("RGB").save(buf, format="PNG")
        return buf.getvalue()
    if isinstance(source, (bytes, bytearray)):
        return bytes(source)
    if not isinstance(source, (str, Path)):
        kind = type(source).__name__
        raise UserInputError(f"a page is a path, a bundled sample's name, bytes or a PIL image, got {kind}")
    path = Path(source)
    if path.is_file():
        return str(path)
    for name in (str(source), *(f"{source}{suffix}" for suffix in PAGE_SUFFIXES)):
        if "/" not in name and (SAMPLES / name).is_file():
            return str(SAMPLES / name)
    raise UserInputError(f"no such file or bundled sample: {source} (samples: {', '.join(samples())})")


def display_name(source: Source) -> str:
    """The input's file name, for page labels (bytes and images have none)."""
    resolved = resolve(source)
    return Path(resolved).name if isinstance(resolved, str) else "page"


def is_sample(resolved: str | bytes) -> bool:
    """Our own files render in-process; anything else in the isolated worker."""
    return isinstance(resolved, str) and Path(resolved).resolve().parent == SAMPLES.resolve()
