"""Animations to take away: ``view --gif/--mp4``, ``trace.save_gif``, on the shipped traces and real pages."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageSequence

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.probes.replay import page_for_trace
from mudiff_viz.views.animation import DONE, NOW, AnimationOptions, Animator, frame_forwards, save_gif, save_mp4

ROOT = Path(__file__).resolve().parent.parent
DIFFUSION = ROOT / "assets" / "traces" / "courier-short.diffusion.json"
AR = ROOT / "assets" / "traces" / "courier-short.ar.json"
SELF_SPEC = ROOT / "assets" / "lessons" / "nano-subword.self-speculative.json.gz"


def load(path: Path) -> Trace:
    data = path.read_bytes()
    return Trace.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mudiff_viz", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def box_centre(anim: Animator, trace: Trace) -> tuple[int, int]:
    """A committed token's box centre in frame pixels (the first token that has a box)."""
    box = next(t.box for r in trace.regions for t in r.tokens if t.box is not None and not t.stop)
    x0, y0, _, _ = anim.page_box
    bx0, by0, bx1, by1 = anim.to_panel(box)
    return (round(x0 + (bx0 + bx1) / 2), round(y0 + (by0 + by1) / 2))


def tinted(pixel, colour) -> bool:
    """The pixel leans towards ``colour``: its strongest channel is the colour's strongest."""
    return int(np.argmax(pixel)) == int(np.argmax(colour)) and max(pixel) - min(pixel) > 25


def test_view_gif_one_frame_per_forward(tmp_path):
    out = tmp_path / "d.gif"
    r = cli("view", str(DIFFUSION), "--gif", str(out), "--width", "720")
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}" in r.stdout
    trace = Trace.load(DIFFUSION)
    with Image.open(out) as gif:
        frames = [f.convert("RGB") for f in ImageSequence.Iterator(gif)]
        assert gif.width == 720
    assert len(frames) == trace.clock_length + 1  # the start, then one frame per forward
    assert out.stat().st_size < 8e6
    # frame 0: nothing committed; the last frame: the first token's box is drawn committed (blue)
    anim = Animator(trace, page_for_trace(trace.page), AnimationOptions(width=720))
    x, y = box_centre(anim, trace)
    assert not tinted(frames[0].getpixel((x, y)), DONE)
    assert tinted(frames[-1].getpixel((x, y)), DONE)
    assert frames[0].tobytes() != frames[-1].tobytes()


def test_frame_shows_this_forwards_commits_in_vermillion():
    trace = load(SELF_SPEC)
    anim = Animator(trace, page_for_trace(trace.page), AnimationOptions())
    first = next(t for r in trace.regions for t in r.tokens if t.box is not None and not t.stop)
    frame = anim.frame(first.commit_forward)
    x0, y0, _, _ = anim.page_box
    bx0, by0, bx1, by1 = anim.to_panel(first.box)
    x, y = round(x0 + (bx0 + bx1) / 2), round(y0 + (by0 + by1) / 2)
    assert tinted(frame.getpixel((x, y)), NOW)
    assert "self-speculative" in anim.caption(first.commit_forward)
    assert f"forward {first.commit_forward + 1}/{trace.clock_length}" in anim.caption(first.commit_forward)


def test_long_decode_is_sampled_and_ends_on_the_last_forward(tmp_path):
    trace = Trace.load(AR)
    assert trace.clock_length > 40
    shown = frame_forwards(trace.clock_length, [], AnimationOptions(max_frames=20))
    assert len(shown) <= 22 and shown[0] == -1 and shown[-1] == trace.clock_length - 1
    assert shown == sorted(shown)
    size = save_gif(trace, tmp_path / "ar.gif", page_for_trace(trace.page), AnimationOptions(width=480, max_frames=20))
    with Image.open(tmp_path / "ar.gif") as gif:
        assert gif.n_frames == len(shown)
    assert size < 8e6


def test_wall_clock_frames_are_even_in_time(tmp_path):
    trace = Trace.load(DIFFUSION)
    anim = Animator(trace, None, AnimationOptions(clock="wall", fps=10))
    shown = frame_forwards(anim.n, anim.times, anim.opts)
    assert shown[-1] == trace.clock_length - 1 and shown == sorted(shown)
    assert " s" in anim.caption(shown[-1])  # the wall clock is named on the frame


def test_notebook_save_gif_and_mp4(tmp_path):
    trace = load(SELF_SPEC)
    assert trace.save_gif(tmp_path / "a.gif", width=400) == (tmp_path / "a.gif").stat().st_size
    pytest.importorskip("imageio_ffmpeg")
    import imageio_ffmpeg

    size = trace.save_mp4(tmp_path / "a.mp4", width=400, fps=5)
    assert size > 0 and (tmp_path / "a.mp4").read_bytes()[4:8] == b"ftyp"
    frames, _ = imageio_ffmpeg.count_frames_and_secs(str(tmp_path / "a.mp4"))
    # every forward's frame, plus the last frame held for hold_s
    assert frames == trace.clock_length + 1 + round(2.0 * 5) - 1


def test_view_mp4_from_the_cli(tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    out = tmp_path / "d.mp4"
    r = cli("view", str(DIFFUSION), "--mp4", str(out), "--width", "500")
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[4:8] == b"ftyp"


@pytest.mark.parametrize("flags, reason", [
    (["--width", "10"], "animation width must be 320-3840 pixels, got 10"),
    (["--fps", "nan"], "animation fps must be 0.5-60, got nan"),
    (["--max-frames", "1"], "animation max_frames must be 2-5000, got 1"),
])
def test_bad_animation_options_are_one_line(tmp_path, flags, reason):
    r = cli("view", str(DIFFUSION), "--gif", str(tmp_path / "x.gif"), *flags)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"error: {reason}"]
    assert not (tmp_path / "x.gif").exists()


def test_blank_page_without_an_image():
    trace = Trace.load(DIFFUSION)
    frame = Animator(trace, None, AnimationOptions(width=640)).frame(trace.clock_length - 1)
    assert frame.width == 640 and frame.getbbox() is not None


def test_options_are_checked():
    with pytest.raises(UserInputError, match="clock"):
        AnimationOptions(clock="sundial").check()


def test_view_reads_gzipped_recordings_within_the_size_limit(tmp_path):
    r = cli("view", str(SELF_SPEC))
    assert r.returncode == 0 and "self-speculative" in r.stdout, r.stderr
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (65 * 2**20)))  # 65 MiB of spaces in a ~65 KB file
    r = cli("view", str(bomb))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"error: trace unpacks to more than {64 * 2**20} bytes (the trace size limit)"]
