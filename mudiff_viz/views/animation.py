"""A decode as an animation to take away (slides, papers, posts): GIF with Pillow, MP4 with imageio-ffmpeg.

Each frame is the page with its token boxes beside the decoded text, plus a caption line (model, decoder,
forward k/N). It reads the same slot table as the player (:func:`~mudiff_viz.views.player.slots`), so a
frame shows what the player shows at that forward: tokens committed earlier, tokens committed by this
forward, and positions still masked in an open block (drawn as grey cells, with the model's current
guess faintly inside). The text is laid out once at its final width, so only colours change from frame
to frame: the animation does not jitter, and GIF frames store only what changed.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.views.labels import decoder_label
from mudiff_viz.views.player import clock_times, slots

# Okabe-Ito, as the player: committed earlier (blue), committed by this forward (vermillion), masked (grey)
DONE = (0, 114, 178)
NOW = (213, 94, 0)
MASKED = (125, 133, 144)
INK = (29, 31, 35)
MUTED = (110, 116, 125)
GHOST = (150, 156, 165)
PAPER = (255, 255, 255)
CLOCKS = ("forward", "wall")
MIN_WIDTH, MAX_WIDTH = 320, 3840


@dataclass(frozen=True)
class AnimationOptions:
    """How an animation is drawn: ``width`` in pixels (the height follows the page), ``fps`` frames a
    second, ``clock`` "forward" (one frame per forward) or "wall" (frames at even wall-time steps),
    ``max_frames`` (a long decode shows every k-th forward, the last one always), ``hold_s`` (the
    last frame stays this long)."""

    width: int = 960
    fps: float = 6.0
    clock: str = "forward"
    max_frames: int = 300
    hold_s: float = 2.0
    fit_text: bool = True  # the page cropped to its text (as the player's "fit the text"), else the whole page

    def check(self) -> None:
        if not MIN_WIDTH <= self.width <= MAX_WIDTH:
            raise UserInputError(f"animation width must be {MIN_WIDTH}-{MAX_WIDTH} pixels, got {self.width}")
        if not (math.isfinite(self.fps) and 0.5 <= self.fps <= 60):
            raise UserInputError(f"animation fps must be 0.5-60, got {self.fps}")
        if self.clock not in CLOCKS:
            raise UserInputError(f"animation clock must be one of {', '.join(CLOCKS)}, got {self.clock!r}")
        if not 2 <= self.max_frames <= 5000:
            raise UserInputError(f"animation max_frames must be 2-5000, got {self.max_frames}")


@dataclass
class Cell:
    """One slot in the text panel: where it is drawn and what it says when committed."""

    slot: int
    x: float
    line: int
    text: str
    width: float


def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """Pillow's bundled font: no system font and nothing fetched, so frames look the same everywhere."""
    return ImageFont.load_default(size=size)


def visible(text: str) -> str:
    """A token as drawn: tabs as spaces; other control characters dropped (newlines are line breaks)."""
    return "".join(" " if c == "\t" else c for c in text if c == "\t" or c >= " ")


def layout_text(table: dict, width: float, fnt) -> list[Cell]:
    """Every non-filler slot placed in reading order, wrapped at ``width``, one line per region or newline.

    A slot's width is its final token's: masked cells keep the size the committed token will have."""
    cells: list[Cell] = []
    line, x, last_region = 0, 0.0, None
    space = fnt.getlength(" ")
    for i, region in enumerate(table["region"]):
        if table["filler"][i] or table["stop"][i]:
            continue
        if last_region is not None and region != last_region:
            line, x = line + 1, 0.0
        last_region = region
        for k, part in enumerate(table["text"][i].split("\n")):
            if k:
                line, x = line + 1, 0.0
            text = visible(part)
            w = fnt.getlength(text) if text else (space if k == 0 and "\n" not in table["text"][i] else 0.0)
            if x > 0 and x + w > width:
                line, x = line + 1, 0.0
            if w > 0 or k == 0:
                cells.append(Cell(slot=i, x=x, line=line, text=text, width=max(w, space * 0.6)))
            x += w
    return cells


def text_extent(trace: Trace, margin: float = 0.04) -> tuple[float, float, float, float] | None:
    """The page's text area (the regions' boxes joined, a small margin around), inside the page."""
    boxes = [r.bbox for r in trace.regions if r.bbox]
    if not boxes:
        return None
    W, H = float(trace.page.width), float(trace.page.height)
    x0, y0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
    x1, y1 = max(b[2] for b in boxes), max(b[3] for b in boxes)
    pad = margin * max(x1 - x0, y1 - y0)
    box = (max(0.0, x0 - pad), max(0.0, y0 - pad), min(W, x1 + pad), min(H, y1 + pad))
    return box if box[2] - box[0] >= 8 and box[3] - box[1] >= 8 else None


def frame_forwards(n: int, times: list[float], opts: AnimationOptions) -> list[int]:
    """The forward shown by each frame (-1: before the first forward).

    Forward clock: every forward, or every k-th when there are more than ``max_frames`` (the last one
    always). Wall clock: frames ``1/fps`` apart in time, each showing the forwards finished by then."""
    if n == 0:
        return [-1]
    if opts.clock == "wall":
        start, end = (times[0] if times else 0.0), (times[-1] if times else 0.0)
        count = max(2, min(opts.max_frames, int(math.ceil((end - start) * opts.fps)) + 1))
        ticks = [start + (end - start) * j / (count - 1) for j in range(count)]
        return [bisect.bisect_right(times, t) - 1 for t in ticks]
    step = max(1, math.ceil(n / opts.max_frames))
    shown = list(range(step - 1, n, step))
    if shown[-1] != n - 1:
        shown.append(n - 1)
    return [-1] + shown


def ghosts_at(trace: Trace, index: dict[tuple[int, int], int]) -> dict[int, dict[int, int]]:
    """Per forward: the model's current guess at each still-masked slot (slot -> token id)."""
    out: dict[int, dict[int, int]] = {}
    for s in trace.steps:
        row = out.setdefault(s.forward, {})
        for p, c, cand in zip(s.positions, s.committed, s.candidates):
            if not c and (s.region, p) in index:
                row[index[(s.region, p)]] = cand
    return out


class Animator:
    """Draws the frames of one trace (page image optional: without it, a blank page with its boxes)."""

    def __init__(self, trace: Trace, page_image: Image.Image | None, opts: AnimationOptions):
        opts.check()
        self.trace, self.opts = trace, opts
        sl = slots(trace)
        self.table, self.index = sl["table"], sl["index"]
        self.n = trace.clock_length
        self.times = clock_times(trace) if self.n else []
        self.ghosts = ghosts_at(trace, self.index)
        W = opts.width
        scale_font = W / 960
        self.caption_font, self.text_font = font(round(15 * scale_font)), font(round(13 * scale_font))
        self.caption_h = round(30 * scale_font)
        self.pad = round(10 * scale_font)
        page_w = round(W * 0.46)
        self.crop = text_extent(trace) if opts.fit_text else None
        cx0, cy0, cx1, cy1 = self.crop or (0.0, 0.0, float(trace.page.width) or 1.0, float(trace.page.height) or 1.0)
        self.origin = (cx0, cy0)
        pw, ph = max(1.0, cx1 - cx0), max(1.0, cy1 - cy0)
        page_h = round(page_w * ph / pw)
        self.text_x = self.pad * 2 + page_w
        self.text_w = W - self.text_x - self.pad
        self.line_h = round(self.text_font.size * 1.45)
        self.cells = layout_text(self.table, self.text_w, self.text_font)
        self.lines = 1 + max((c.line for c in self.cells), default=0)
        # as tall as the page or the text needs, within a slide's proportions
        self.body_h = min(max(page_h, (self.lines + 1) * self.line_h, round(W * 0.3)), round(W * 1.25))
        if page_h > self.body_h:  # a very tall page: fit its height instead
            page_w, page_h = round(self.body_h * pw / ph), self.body_h
        self.page_box = (self.pad, self.caption_h, page_w, page_h)
        self.scale = page_w / pw
        self.page = self.page_background(page_image, page_w, page_h)
        self.legend_h = self.line_h + self.pad
        self.size = (W, self.caption_h + self.body_h + self.legend_h)

    def to_panel(self, box) -> tuple[float, float, float, float]:
        """A page-pixel box in the page panel's pixels (after the crop to the text)."""
        ox, oy = self.origin
        x0, y0, x1, y1 = box
        return ((x0 - ox) * self.scale, (y0 - oy) * self.scale, (x1 - ox) * self.scale, (y1 - oy) * self.scale)

    def page_background(self, image: Image.Image | None, w: int, h: int) -> Image.Image:
        if image is not None:
            img = image.convert("RGB")
            if self.crop is not None:
                img = img.crop(tuple(round(v) for v in self.crop))
            return img.resize((w, h), Image.LANCZOS)
        blank = Image.new("RGB", (w, h), PAPER)
        draw = ImageDraw.Draw(blank)
        for r in self.trace.regions:  # where the text was, so the boxes have a place
            draw.rectangle(self.to_panel(r.bbox), outline=(215, 218, 223))
        return blank

    def state(self, i: int, f: int) -> str:
        """'done', 'now', 'masked' or 'hidden' for slot ``i`` after forward ``f``."""
        commit, opened = self.table["commit"][i], self.table["open"][i]
        if 0 <= commit < f:
            return "done"
        if commit == f and f >= 0:
            return "now"
        if 0 <= opened <= f:
            return "masked"
        return "hidden"

    def caption(self, f: int) -> str:
        t = self.trace
        who = t.model.name + (f" + {t.verifier.name} verifying" if t.verifier is not None else "")
        clock = f"forward {f + 1}/{self.n}" if f >= 0 else f"forward 0/{self.n}"
        if self.opts.clock == "wall" and self.times:
            clock += f" · {self.times[max(f, 0)]:.2f} s"
        return f"{who} · {decoder_label(t.decoder)} · {clock}"

    def frame(self, f: int) -> Image.Image:
        W, H = self.size
        img = Image.new("RGB", (W, H), PAPER)
        x0, y0, pw, ph = self.page_box
        page = self.page.copy()
        overlay = Image.new("RGBA", page.size, (0, 0, 0, 0))
        od = ImageDraw.Draw(overlay)
        for i, box in enumerate(self.table["box"]):
            if box is None or self.table["filler"][i]:
                continue
            st = self.state(i, f)
            if st == "hidden":
                continue
            rect = self.to_panel(box)
            if st == "done":
                od.rectangle(rect, fill=DONE + (80,))
            elif st == "now":
                od.rectangle(rect, fill=NOW + (120,), outline=NOW + (255,))
            else:
                od.rectangle(rect, fill=MASKED + (70,))
        page.paste(overlay, (0, 0), overlay)
        img.paste(page, (x0, y0))
        draw = ImageDraw.Draw(img)
        draw.rectangle((x0 - 1, y0 - 1, x0 + pw, y0 + ph), outline=(200, 204, 210))
        draw.text((self.pad, self.caption_h // 2), self.caption(f), fill=INK, font=self.caption_font, anchor="lm")
        self.draw_text(draw, f)
        self.draw_legend(draw)
        return img

    def draw_legend(self, draw: ImageDraw.ImageDraw) -> None:
        """What the colours mean, on every frame (a slide shows one frame at a time)."""
        x, y = self.pad, self.size[1] - self.legend_h + self.pad // 2
        s = self.line_h - 6
        for colour, label in ((DONE, "committed earlier"), (NOW, "committed by this forward"),
                              (MASKED, "still masked (grey text: the model's current guess)")):
            draw.rectangle((x, y + 3, x + s, y + 3 + s), fill=tuple(round(255 - (255 - c) * 0.55) for c in colour),
                           outline=colour)
            draw.text((x + s + 5, y + 2), label, fill=MUTED, font=self.text_font)
            x += s + 5 + self.text_font.getlength(label) + 2 * self.pad

    def draw_text(self, draw: ImageDraw.ImageDraw, f: int) -> None:
        visible_lines = max(1, (self.body_h - self.line_h) // self.line_h)
        frontier = max((c.line for c in self.cells if self.state(c.slot, f) != "hidden"), default=0)
        first = min(max(0, frontier - visible_lines * 2 // 3), max(0, self.lines - visible_lines))
        ghosts = self.ghosts.get(f, {})
        top = self.caption_h
        for c in self.cells:
            row = c.line - first
            if row < 0 or row >= visible_lines:
                continue
            st = self.state(c.slot, f)
            x, y = self.text_x + c.x, top + row * self.line_h
            if st == "hidden":
                continue
            if st == "masked":
                draw.rectangle((x + 1, y + 2, x + max(2.0, c.width - 1), y + self.line_h - 3), fill=(228, 231, 235))
                guess = ghosts.get(c.slot)
                if guess is not None:
                    g = visible(self.trace.token_text(guess).split("\n")[0])
                    if g.strip():
                        draw.text((x + 1, y + 2), g, fill=GHOST, font=self.text_font)
                continue
            colour = NOW if st == "now" else INK
            if st == "now":
                draw.rectangle((x, y + 1, x + c.width, y + self.line_h - 2), fill=(250, 226, 208))
            draw.text((x, y + 2), c.text, fill=colour, font=self.text_font)
        if self.lines > visible_lines:
            note = f"lines {first + 1}-{min(self.lines, first + visible_lines)} of {self.lines}"
            draw.text((self.size[0] - self.pad, top + self.body_h), note, fill=MUTED, font=self.text_font, anchor="rd")

    def frames(self) -> Iterator[Image.Image]:
        for f in frame_forwards(self.n, self.times, self.opts):
            yield self.frame(f)

    def frame_count(self) -> int:
        return len(frame_forwards(self.n, self.times, self.opts))


def save_gif(trace: Trace, path: str | Path, page_image: Image.Image | None = None,
             opts: AnimationOptions | None = None) -> int:
    """Write the decode as an animated GIF; returns its size in bytes."""
    anim = Animator(trace, page_image, opts or AnimationOptions())
    rgb = list(anim.frames())
    # one palette for every frame (from a frame mid-decode and the last: every state's colours), so
    # colours do not flicker and unchanged pixels stay identical between frames
    sample = Image.new("RGB", (rgb[0].width, rgb[0].height * 2))
    sample.paste(rgb[len(rgb) // 2], (0, 0))
    sample.paste(rgb[-1], (0, rgb[0].height))
    palette = sample.quantize(colors=128, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    frames = [im.quantize(palette=palette, dither=Image.Dither.NONE) for im in rgb]
    frame_ms = round(1000 / anim.opts.fps)
    durations = [frame_ms] * (len(frames) - 1) + [max(frame_ms, round(anim.opts.hold_s * 1000))]
    path = Path(path)
    frames[0].save(path, format="GIF", save_all=True, append_images=frames[1:], duration=durations, loop=0,
                   optimize=False, disposal=1)
    return path.stat().st_size


def save_mp4(trace: Trace, path: str | Path, page_image: Image.Image | None = None,
             opts: AnimationOptions | None = None) -> int:
    """Write the decode as an H.264 MP4 (imageio-ffmpeg, an optional extra); returns its size in bytes."""
    try:
        import imageio_ffmpeg
    except ImportError:
        raise UserInputError("MP4 export needs imageio-ffmpeg: pip install -e '.[video]' (or use a GIF)") from None
    anim = Animator(trace, page_image, opts or AnimationOptions())
    W, H = anim.size
    W2, H2 = W + W % 2, H + H % 2  # H.264 with yuv420p needs even sides
    hold = max(1, round(anim.opts.hold_s * anim.opts.fps))
    path = Path(path)
    writer = imageio_ffmpeg.write_frames(str(path), (W2, H2), fps=anim.opts.fps, codec="libx264",
                                         pix_fmt_out="yuv420p", macro_block_size=1, quality=7,
                                         output_params=["-movflags", "+faststart"])
    writer.send(None)
    try:
        last = None
        for im in anim.frames():
            if (W2, H2) != (W, H):
                canvas = Image.new("RGB", (W2, H2), PAPER)
                canvas.paste(im, (0, 0))
                im = canvas
            last = im.tobytes()
            writer.send(last)
        for _ in range(hold - 1):
            writer.send(last)
    finally:
        writer.close()
    return path.stat().st_size
