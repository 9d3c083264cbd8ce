"""Corpus inputs: PDFs with optional page ranges, images, folders of both; sidecar ground truth.

``file.pdf:1-3,7`` decodes pages 1, 2, 3 and 7 (1-based, as a reader counts them). A folder
contributes every PDF, PNG and JPEG below it, sorted. An image's ground truth is its sidecar
``<stem>.txt``; a PDF's is its text layer. Bad specs (a missing file, a malformed or out-of-range
page range) are one-line errors before anything is decoded; a file that cannot be opened is not:
its page is decoded, fails and is recorded like any other failure, so one hostile file never stops
a run.
"""

from __future__ import annotations

import hashlib
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits, current
from mudiff_viz.inputs.pages import read_source, sniff_kind
from mudiff_viz.inputs.pdf import render_pdf_page

INPUT_SUFFIXES = (".pdf", ".png", ".jpg", ".jpeg")
_RANGE = re.compile(r"^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*$")


@dataclass(frozen=True)
class SourceFile:
    """One input file and the pages of it to decode."""

    path: str  # as given: workers read it, rows record it
    sha256: str
    kind: str  # "pdf" | "png" | "jpeg" | "unreadable" (decoding it fails with the reason)
    pages: tuple[int, ...]  # 0-based page indices
    gt_text: str | None = None  # sidecar text of an image
    error: str = ""  # why the file could not be opened (kind "unreadable")


def parse_page_range(text: str) -> list[int]:
    """``"1-3,7"`` -> [0, 1, 2, 6]: 1-based inclusive ranges to sorted 0-based indices."""
    if not _RANGE.match(text):
        raise UserInputError(f"bad page range {text!r}: use page numbers from 1, e.g. 1-3,7")
    pages: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        a, b = int(lo), int(hi or lo)
        if a < 1 or b < a:
            raise UserInputError(f"bad page range {part.strip()!r}: pages count from 1 and ranges go upwards")
        pages.update(range(a - 1, b))
    return sorted(pages)


def split_spec(spec: str) -> tuple[Path, str | None]:
    """``file.pdf:1-3`` -> (file.pdf, "1-3"); a path that exists as given has no range."""
    path = Path(spec)
    if path.exists():
        return path, None
    head, sep, tail = spec.rpartition(":")
    if sep and head and Path(head).exists():
        return Path(head), tail
    raise UserInputError(f"no such file or folder: {head if sep and head else spec}")


def expand(specs: Sequence[str]) -> list[tuple[Path, str | None]]:
    """Input specs -> (file, page range) pairs; folders become their files, sorted."""
    out: list[tuple[Path, str | None]] = []
    for spec in specs:
        path, pages = split_spec(spec)
        if path.is_dir():
            if pages is not None:
                raise UserInputError(f"{spec}: a page range needs a PDF file, not a folder")
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in INPUT_SUFFIXES)
            if not files:
                raise UserInputError(f"no PDF, PNG or JPEG files in {path}")
            out.extend((f, None) for f in files)
        else:
            out.append((path, pages))
    return out


def sidecar_text(path: Path) -> str | None:
    sidecar = path.with_suffix(".txt")
    return sidecar.read_text(encoding="utf-8", errors="replace") if sidecar.is_file() else None


def page_count(data: bytes, limits: Limits) -> int:
    """Pages of an untrusted PDF, read in the isolated PDF worker (a 1-DPI render of page 1)."""
    return render_pdf_page(data, 0, 1.0, limits).page_count


def open_source(path: Path, page_range: str | None, limits: Limits) -> SourceFile:
    """Read one input file, check its page range against its pages."""
    wanted = parse_page_range(page_range) if page_range is not None else None
    data, _ = read_source(path, limits)  # a missing or oversized file is a bad input: one line, exit 2
    digest = hashlib.sha256(data).hexdigest()
    try:
        kind = sniff_kind(data)
    except UserInputError as exc:
        return SourceFile(str(path), digest, "unreadable", tuple(wanted or [0]), error=str(exc))
    if kind != "pdf":
        if wanted is not None and wanted != [0]:
            raise UserInputError(f"{path}: an image has one page, so its only page range is 1")
        return SourceFile(str(path), digest, kind, (0,), gt_text=sidecar_text(path))
    try:
        n = page_count(data, limits)
    except UserInputError as exc:  # unopenable: decoding its page fails and is recorded
        return SourceFile(str(path), digest, "unreadable", tuple(wanted or [0]), error=str(exc))
    missing = [p + 1 for p in wanted or [] if p >= n]
    if missing:
        raise UserInputError(f"{path}: page {missing[0]} does not exist (the PDF has {n} pages)")
    return SourceFile(str(path), digest, kind, tuple(wanted if wanted is not None else range(n)))


def collect_sources(specs: Sequence[str], limits: Limits | None = None, threads: int = 4) -> list[SourceFile]:
    """Every input spec as files with their pages, in the order given (PDF page counts in parallel:
    each is a short child process)."""
    limits = limits or current()
    if not specs:
        raise UserInputError("no inputs given")
    pairs = expand(specs)
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        return list(pool.map(lambda pair: open_source(pair[0], pair[1], limits), pairs))
