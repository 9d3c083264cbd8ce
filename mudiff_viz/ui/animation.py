"""The "Download animation" row under a player: its traces as a GIF or an MP4, made when asked.

A player's downloads hold its traces (JSON). Gradio copies them into its own cache, so the row finds
each trace's page image by the trace file's hash: results remember the page they showed (a small,
bounded cache of JPEG bytes). A trace made on a bundled sample finds its page again without it;
otherwise the animation draws the token boxes on a blank page.
"""

from __future__ import annotations

import base64
import hashlib
import io
import threading
from collections import OrderedDict
from pathlib import Path

import gradio as gr
from PIL import Image

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.probes.replay import page_for_trace
from mudiff_viz.ui.common import file_path, request_dir, safe_stem, user_errors
from mudiff_viz.views.animation import AnimationOptions, save_gif, save_mp4

PAGES_KEPT = 32  # page images remembered (JPEG bytes, ~0.1-0.4 MB each)
_pages: OrderedDict[str, bytes] = OrderedDict()
_lock = threading.Lock()
FORMATS = {"GIF": (".gif", save_gif), "MP4": (".mp4", save_mp4)}


def file_digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def remember_page(trace_path: str | Path, image_url: str | None) -> None:
    """Keep the page a result showed (its JPEG data URL) for the trace file written at ``trace_path``."""
    if not image_url or not image_url.startswith("data:image/"):
        return
    data = base64.b64decode(image_url.split(",", 1)[1])
    key = file_digest(trace_path)  # the trace file is read and hashed once
    with _lock:
        _pages[key] = data
        _pages.move_to_end(key)
        while len(_pages) > PAGES_KEPT:
            _pages.popitem(last=False)


def page_image(trace: Trace, trace_path: str | Path) -> Image.Image | None:
    """The page under a trace: the one its result showed, else its bundled sample, else none."""
    with _lock:
        data = _pages.get(file_digest(trace_path))
    if data is not None:
        return Image.open(io.BytesIO(data), formats=["JPEG"]).convert("RGB")
    return page_for_trace(trace.page)


def downloaded_traces(downloads) -> list[tuple[str, Trace, Image.Image | None]]:
    """(name, trace, page image) of each trace among a player's downloads."""
    paths = [file_path(f) for f in (downloads or [])]
    out = []
    for p in (p for p in paths if p and p.endswith(".json")):
        trace = Trace.load(p)
        out.append((Path(p).name.removesuffix(".json").removesuffix(".trace"), trace, page_image(trace, p)))
    return out


def animate(traces: list[tuple[str, Trace, Image.Image | None]], fmt: str = "GIF", width: int = 960) -> list[str]:
    """Each (name, trace, page image) as an animation file; returns the paths written."""
    if fmt not in FORMATS:
        raise UserInputError(f"animation format must be GIF or MP4, got {str(fmt)[:20]!r}")
    if not traces:
        raise UserInputError("nothing to animate yet: run a decode or load a trace first")
    suffix, save = FORMATS[fmt]
    outdir = request_dir()
    written = []
    for name, trace, image in traces:
        target = outdir / f"{safe_stem(name)}{suffix}"
        save(trace, target, image, AnimationOptions(width=int(width)))
        written.append(str(target))
    return written


def animation_row(prefix: str, source: gr.components.Component, traces_of=downloaded_traces) -> gr.File:
    """Buttons that turn the player's traces into a GIF or an MP4, and the file they make. ``source``
    holds what the player shows (its downloads, by default); ``traces_of`` turns its value into traces."""
    with gr.Row(elem_classes="mudiff-animation-row"):
        gif = gr.Button("Download animation (GIF)", size="sm", elem_id=f"{prefix}-gif", scale=0, min_width=220)
        mp4 = gr.Button("… as MP4 video", size="sm", elem_id=f"{prefix}-mp4", scale=0, min_width=160)
    out = gr.File(label="Animation: the page, its token boxes and the text, one frame per forward pass",
                  file_count="multiple", interactive=False, visible=False, elem_id=f"{prefix}-animation")

    def make(fmt: str):
        @user_errors
        def handler(value):
            return gr.update(value=animate(traces_of(value), fmt), visible=True)

        return handler

    for button, fmt in ((gif, "GIF"), (mp4, "MP4")):
        button.click(make(fmt), source, out, api_name=f"{prefix}_animation_{fmt.lower()}",
                     concurrency_id="animation", concurrency_limit=1, show_progress="minimal")
    return out
