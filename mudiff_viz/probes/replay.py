"""The page a saved trace was made on, found again among known files by its SHA-256.

A trace stores the page's size and the SHA-256 of its source file, not its pixels. When a trace was
made from one of the bundled samples (or any file in the given folders) the page is found again by
that hash, re-rendered at the trace's DPI, and the probes the trace records (occlusion,
degradation: both deterministic) are applied again, so a saved trace replays on its page with no
model.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from PIL import Image

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import PageRecord
from mudiff_viz.inputs.page import Page
from mudiff_viz.inputs.pages import load_page
from mudiff_viz.probes.perturb import degrade, occlude, occlude_pdf

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "assets" / "samples"
PAGE_SUFFIXES = (".pdf", ".png", ".jpg", ".jpeg")


@lru_cache(maxsize=64)
def _sha256(path: str, mtime: float, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def file_sha256(path: str | Path) -> str:
    st = Path(path).stat()
    return _sha256(str(path), st.st_mtime, st.st_size)


def find_source(sha256: str, folders: tuple[Path, ...] = (SAMPLES,)) -> Path | None:
    """A page file in ``folders`` whose bytes hash to ``sha256``."""
    if not sha256:
        return None
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.suffix.lower() in PAGE_SUFFIXES and path.is_file() and file_sha256(path) == sha256:
                return path
    return None


def page_for_trace(page: PageRecord, folders: tuple[Path, ...] = (SAMPLES,)) -> Image.Image | None:
    """The rendered page of a trace's ``page`` record, when its source file is in ``folders``."""
    path = find_source(page.sha256, folders)
    if path is None:
        return None
    degraded = page.probes.get("degrade") or {}
    dpi = float(page.dpi or 150) if not degraded.get("dpi") else float(degraded.get("source_dpi") or 150)
    try:
        loaded = load_page(path, page_index=page.page_index, dpi=dpi)
        for name, changes in page.probes.items():
            loaded = reapply(name, changes, loaded, path)
    except UserInputError:
        return None
    if (loaded.width, loaded.height) != (page.width, page.height):
        return None  # rendered differently: the boxes would not line up
    return loaded.image


def reapply(name: str, changes: dict, page: Page, path: Path) -> Page:
    """A recorded probe applied again (they are deterministic given their record)."""
    if name == "occlude" and changes.get("kind") == "pdf-redaction":
        return occlude_pdf(path.read_bytes(), page.page_index, words=changes["words"], dpi=float(page.dpi or 150),
                           trusted=path.parent == SAMPLES).page
    if name == "occlude":
        return occlude(page, words=changes["words"]).page
    if name == "degrade":
        keys = ("dpi", "blur", "noise", "jpeg", "rotate", "seed")
        return degrade(page, **{k: changes[k] for k in keys if changes.get(k) is not None}).page
    return page
