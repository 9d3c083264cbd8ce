"""Pages as the app's tabs see them: chosen, loaded once, previewed, and clicked to pick words.

Every tab's page picker goes through :func:`preview`: the page is rendered once at decode DPI and
kept in a small cache keyed by the file's SHA-256 and page number, so a fresh page load (three
tabs, one sample) renders one page, flipping pages back and forth renders nothing twice, and the
decode that follows starts from the very page the preview showed. Bundled samples are our own
files and render in-process; uploads render in the isolated worker. A preview never raises: a bad
file or a page that does not exist comes back as the reason, in words, under the preview.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from PIL import Image, ImageDraw

from mudiff_viz.core.errors import ModelLoadError, UserInputError
from mudiff_viz.core.limits import current as current_limits
from mudiff_viz.core.page_numbers import page_number
from mudiff_viz.inputs.page import Page
from mudiff_viz.inputs.pages import load_page, read_source, sniff_kind
from mudiff_viz.probes.apply import DECODE_DPI, ProbeSpec, parse_word_list, probed_page
from mudiff_viz.probes.perturb import choose_words, page_words, word_at
from mudiff_viz.probes.replay import file_sha256, find_source
from mudiff_viz.ui.common import file_path, one_line
from mudiff_viz.views.labels import counted
from mudiff_viz.views.markdown import md_text

PREVIEW_WIDTH = 620  # pixels: enough to click a word on a letter page
CACHE_PAGES = 8  # about 6 MB each at 150 DPI
CHOSEN = (213, 94, 0)  # clicked words (vermillion)
DRAWN = (230, 159, 0)  # words picked by the occlusion fraction (orange)


class PageCache:
    """A small thread-safe LRU of loaded pages: (sha256, page number) -> Page."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key, make: Callable[[], Page]) -> Page:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        page = make()  # outside the lock: a slow render does not block other tabs' cache hits
        with self._lock:
            self._items[key] = page
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return page

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


PAGES = PageCache(CACHE_PAGES)


def is_bundled(path: str) -> bool:
    """A file with the bytes of one of our bundled samples (safe to render in-process)."""
    try:
        return find_source(file_sha256(path)) is not None
    except OSError:
        return False


def load(file, number) -> Page:
    """Page ``number`` (1-based) of the chosen file at decode DPI, from the cache when it is there."""
    path = file_path(file)
    if not path:
        raise UserInputError("choose a page first: upload a PDF, PNG or JPEG, or pick a bundled sample")
    n = page_number(number)
    if not Path(path).is_file():
        raise UserInputError("the uploaded file is gone from the server (uploads expire after an hour): upload it again")
    key = (file_sha256(path), n)

    def make() -> Page:
        limits = current_limits()
        kind = sniff_kind(read_source(path, limits)[0])
        if kind != "pdf" and n != 1:
            raise UserInputError(f"page {n} does not exist: an image has one page")
        return load_page(path, page_index=n - 1, dpi=DECODE_DPI, limits=limits, isolate=not is_bundled(path))

    return PAGES.get(key, make)


@dataclass
class Preview:
    """What a page picker shows: the page (chosen words marked), its page count, a line of info."""

    image: Image.Image | None
    count: int
    number: int
    info: str
    ok: bool


def preview_scale(page: Page) -> float:
    """Preview pixels per page pixel (a click on the preview divides by it)."""
    return min(1.0, PREVIEW_WIDTH / max(1, page.width))


def marked_words(page: Page, words_text: str | None, fraction: float | None, seed: int) -> tuple[list[int], list[int]]:
    """(clicked, drawn): the word indices named in ``words_text``, and those the fraction picks."""
    n = len(page_words(page))
    clicked = [i for i in (parse_word_list(words_text) or ()) if 0 <= i < n]
    drawn = [] if clicked or not fraction else choose_words(n, None, float(fraction), int(seed or 0))
    return clicked, drawn


def draw_preview(page: Page, clicked: list[int], drawn: list[int]) -> Image.Image:
    """The page scaled to the preview width, occluded-to-be words boxed (filled lightly)."""
    scale = preview_scale(page)
    image = page.image.convert("RGB")
    if scale < 1.0:
        image = image.resize((max(1, round(page.width * scale)), max(1, round(page.height * scale))), Image.LANCZOS)
    else:
        image = image.copy()
    if clicked or drawn:
        words = page_words(page)
        overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
        pen = ImageDraw.Draw(overlay)
        for indices, colour in ((drawn, DRAWN), (clicked, CHOSEN)):
            for i in indices:
                x0, y0, x1, y1 = (v * scale for v in words[i].box)
                pen.rectangle((x0 - 1, y0 - 1, x1 + 1, y1 + 1), fill=(*colour, 70), outline=(*colour, 255), width=2)
        image = Image.alpha_composite(image.convert("RGBA"), overlay).convert("RGB")
    return image


def preview(file, number, words_text: str | None = None, fraction: float | None = None, seed: int = 0) -> Preview:
    """The chosen page for the picker. Never raises: failures come back as ``ok=False`` and the
    reason in ``info`` (a bad upload, a page that does not exist, a malformed word list)."""
    path = file_path(file)
    if not path:
        return Preview(None, 1, 1, "Choose a page: upload one or pick a bundled sample.", True)
    name = md_text(Path(path).name)
    try:
        page = load(file, number)
        clicked, drawn = marked_words(page, words_text, fraction, seed)
        image = draw_preview(page, clicked, drawn)
    except (UserInputError, ModelLoadError) as exc:
        return Preview(None, 1, _safe_number(number), f"⚠ **{name}**: {md_text(one_line(exc), 300)}", False)
    except Exception as exc:  # a preview never takes the page down
        return Preview(None, 1, _safe_number(number), f"⚠ **{name}**: {md_text(one_line(exc), 300)}", False)
    n = page_number(number)
    words = len(page_words(page))
    parts = [f"**{name}**", f"page {n} of {page.page_count}"]
    parts.append("text layer: ground truth available" if page.lines else "no text layer: lines are found in the pixels, no CER")
    parts.append(counted(words, "word"))
    if clicked:
        parts.append(f"**{counted(len(clicked), 'word')} chosen to occlude**")
    elif drawn:
        parts.append(f"**{counted(len(drawn), 'word')} will be occluded**")
    return Preview(image, page.page_count, n, " · ".join(parts), True)


def _safe_number(value) -> int:
    """The number as typed (the box keeps it, so the reason under the preview matches what it shows)."""
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 1


def toggle_word(file, number, words_text: str | None, x: float, y: float) -> str:
    """The word list after a click at preview pixel (x, y): the word under it added, or removed if
    it was there. A click between words changes nothing."""
    page = load(file, number)
    scale = preview_scale(page)
    hit = word_at(page, x / scale, y / scale)
    words = list(parse_word_list(words_text) or ())
    if hit is None:
        return words_text or ""
    words = [w for w in words if w != hit] if hit in words else sorted(words + [hit])
    return ", ".join(str(w) for w in words)


def chosen_word_texts(page: Page, words_text: str | None, limit: int = 8) -> str:
    """The chosen words as the page spells them (for the status line)."""
    words = page_words(page)
    picked = [words[i].text or f"#{i}" for i in (parse_word_list(words_text) or ()) if 0 <= i < len(words)]
    more = f" and {len(picked) - limit} more" if len(picked) > limit else ""
    return ", ".join(repr(w) for w in picked[:limit]) + more


def prepare_page(file, number, probes: ProbeSpec) -> Page:
    """The page to decode: the previewed page from the cache, with the probes applied."""
    base = load(file, number)
    if not probes.active:
        return base
    return probed_page(file_path(file), page_number(number) - 1, DECODE_DPI, probes, base=base)
