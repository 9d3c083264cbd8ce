"""The one folder where the app writes for visitors, with a size cap and an age limit.

Request downloads (``req-*``) and unpacked store uploads (``stores/store-*``) live under
:data:`OUT_ROOT`. Before anything is written there, entries older than ``app_file_max_age_s`` go, then
the oldest ones until what is left plus what is about to be written fits ``max_app_disk_bytes``
(both limits in ``core/limits.py``, set by ``MUDIFF_*`` variables). A write that cannot fit even in
an empty folder is refused in one line. So a visitor who uploads in a loop only replaces their own
(and others' oldest) files: the folder never grows past its cap.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import BinaryIO

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import current

OUT_ROOT = Path(tempfile.gettempdir()) / "mudiff-app"
STORES = OUT_ROOT / "stores"  # uploaded stores (the Corpus tab's UPLOADED_STORES)
CHUNK = 1 << 20
_LOCK = threading.Lock()  # one pruning at a time, so two requests never count the same room twice


def tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (0 when it is gone; files vanishing meanwhile are skipped)."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            continue
    return total


def entries(root: Path | None = None) -> list[tuple[float, Path]]:
    """The prunable entries, oldest first: request folders and unpacked stores (by modification time)."""
    root = OUT_ROOT if root is None else root
    found = []
    for d in [*root.glob("req-*"), *(root / "stores").glob("store-*")]:
        try:
            found.append((d.stat().st_mtime, d))
        except OSError:
            continue
    return sorted(found)


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def prune(root: Path | None = None, need: int = 0, now: float | None = None, keep: Path | None = None) -> int:
    """Delete entries past the age limit, then the oldest until ``need`` more bytes fit the cap.
    Returns the bytes in the folder afterwards. ``keep``: an entry being written, never removed."""
    limits = current()
    root = OUT_ROOT if root is None else root
    now = time.time() if now is None else now
    with _LOCK:
        sized = []
        for mtime, path in entries(root):
            if path == keep:
                continue
            if now - mtime > limits.app_file_max_age_s:
                remove(path)
            else:
                sized.append((path, tree_bytes(path)))
        total = sum(size for _, size in sized) + (tree_bytes(keep) if keep is not None else 0)
        for path, size in sized:  # oldest first
            if total + need <= limits.max_app_disk_bytes:
                break
            remove(path)
            total -= size
        return total


def room(need: int, keep: Path | None = None) -> int:
    """Make room for ``need`` bytes; the bytes that may still be written (refused when none)."""
    cap = current().max_app_disk_bytes
    total = prune(need=need, keep=keep)
    free = cap - total
    if free <= 0:
        raise UserInputError("the app's disk space for visitors' files is full: try again in a minute")
    return free


def new_folder(prefix: str, parent: Path | None = None) -> Path:
    """A fresh folder for one request's files (under ``parent``, in the budgeted folder), after pruning."""
    parent = OUT_ROOT if parent is None else parent
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    room(0)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def copy_capped(src: BinaryIO, dst: Path, budget: int) -> int:
    """Copy ``src`` to ``dst`` counting bytes as they come (never trusting a declared size); stops
    and returns -1 once more than ``budget`` bytes have come, else the bytes written."""
    written = 0
    with open(dst, "wb") as out:
        while chunk := src.read(CHUNK):
            written += len(chunk)
            if written > budget:
                return -1
            out.write(chunk)
    return written
