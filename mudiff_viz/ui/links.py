"""Links that open a view: ``?lesson=masks&frame=12``, ``?trace=courier-short.diffusion&frame=3``.

A link names a lesson (its recording), a bundled trace, or a trace uploaded to the Trace viewer and kept
by the server for a while (``trace=upload-<hash>``), and optionally the frame to open at. The players of
such views carry their link (payload ``link``) and offer "Copy link to this frame"; opening the app on a
link selects the tab, loads the view and seeks the player (payload ``start_frame``).
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.ui.common import TRACES
from mudiff_viz.ui.disk import OUT_ROOT, room

KEPT_PREFIX = "req-link-"  # an uploaded trace a link can reopen: a request folder, budgeted and pruned as one (ui/disk.py)
NAME = re.compile(r"^[A-Za-z0-9._-]{1,80}$")
UPLOAD = re.compile(r"^upload-([0-9a-f]{16})$")
MAX_FRAME = 10_000_000


@dataclass(frozen=True)
class Link:
    """What a link asks for: a lesson key or trace names (one, or two on one clock), and a frame."""

    lesson: str | None = None
    traces: tuple[str, ...] = ()
    frame: int | None = None

    @property
    def empty(self) -> bool:
        return self.lesson is None and not self.traces


def parse_link(params: Mapping[str, str], lesson_keys: tuple[str, ...]) -> Link:
    """The link in a page's query parameters; a malformed one is a one-line UserInputError."""
    frame = params.get("frame")
    if frame is not None:
        if not re.fullmatch(r"\d{1,8}", frame.strip()):
            raise UserInputError(f"link: frame must be a whole number >= 0, got {frame[:20]!r}")
        frame = min(int(frame), MAX_FRAME)
    lesson, trace = params.get("lesson"), params.get("trace")
    if lesson is not None and trace is not None:
        raise UserInputError("link: give a lesson or a trace, not both")
    if lesson is not None:
        if lesson not in lesson_keys:
            raise UserInputError(f"link: no lesson {lesson[:40]!r} (lessons: {', '.join(lesson_keys)})")
        return Link(lesson=lesson, frame=frame)
    if trace is not None:
        names = tuple(n.strip() for n in trace.split(","))
        if not 1 <= len(names) <= 2 or not all(NAME.match(n) for n in names):
            raise UserInputError(f"link: trace must be one or two trace names, got {trace[:60]!r}")
        return Link(traces=names, frame=frame)
    return Link(frame=frame)


def trace_file(name: str) -> Path:
    """The file a link's trace name stands for: a bundled trace, or an upload still kept."""
    m = UPLOAD.match(name)
    path = OUT_ROOT / f"{KEPT_PREFIX}{m.group(1)}" / "trace.json" if m else TRACES / f"{name}.json"
    if not path.is_file():
        what = "uploaded trace is no longer kept by the server (uploads are kept for an hour)" if m else \
            f"bundled trace {name!r}"
        raise UserInputError(f"link: no {what}")
    return path


def link_name(path: str | Path) -> str:
    """The name a link uses for a trace file: a bundled trace's stem, else the upload kept under its hash."""
    path = Path(path)
    if path.parent.resolve() == TRACES.resolve():
        return path.name.removesuffix(".json")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    kept = OUT_ROOT / f"{KEPT_PREFIX}{digest}"
    if not (kept / "trace.json").exists():
        room(path.stat().st_size)
        kept.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copyfile(path, kept / "trace.json")
    return f"upload-{digest}"


def with_link(payload: dict, link: dict[str, str], frame: int | None = None) -> dict:
    """A player payload that can say where it lives (and, opened from a link, the frame to show)."""
    if payload.get("kind") == "mudiff-player":
        payload["link"] = link
        if frame is not None:
            payload["start_frame"] = frame
    return payload
