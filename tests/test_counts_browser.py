"""Issue 48: on every frame of every bundled trace (assets/traces, assets/lessons) and of a fresh
default decode, the player's header says the numbers its charts read out, and both are the counts of
core/counts.py. Real Chromium, the offline replay (mudiff_viz/views/export) of each trace; the
header and every chart readout expose their numbers as data attributes, and the header's text is
parsed too, so a number drawn from somewhere else shows."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

import mudiff_viz as mv
from mudiff_viz.core.counts import trace_counts
from mudiff_viz.core.trace import Trace
from tests.ui_support import SAMPLE, require_chromium

require_chromium()

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = sorted((ROOT / "assets" / "traces").glob("*.json")) + sorted((ROOT / "assets" / "lessons").glob("*.json.gz"))

# every frame in one call: scrub there, read the header (text, data attributes) and each chart's readout
READ_FRAMES = """n => {
  const scrub = document.querySelector('#player .mp-scrub'), out = [];
  for (let s = 0; s <= n; s++) {
    scrub.value = s; scrub.dispatchEvent(new Event('input', {bubbles: true}));
    const h = document.querySelector('#player .mp-header'), charts = {};
    document.querySelectorAll('#player .mp-chart').forEach((c) => {
      const r = c.querySelector('.mp-chart-read');
      charts[c.dataset.chart] = {text: r.textContent, values: r.dataset.values ? JSON.parse(r.dataset.values) : null};
    });
    const drawn = document.querySelectorAll('#player .mp-text .st-masked, #player .mp-text .st-ghost').length;
    out.push({text: h.textContent, data: {...h.dataset}, charts, drawn});
  }
  return out;
}"""


def load(path: Path) -> Trace:
    data = path.read_bytes()
    return Trace.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


@pytest.fixture(scope="module")
def fresh() -> Trace:
    """The app's default: the bundled sample, the default model and decoder, default knobs."""
    return mv.decode(str(SAMPLE))


def frames_of(browser, tmp_path, trace: Trace) -> list[dict]:
    from mudiff_viz.views.export import standalone_html_from_payload
    from mudiff_viz.views.player import player_payload

    path = tmp_path / "replay.html"
    path.write_text(standalone_html_from_payload(player_payload(trace), "replay"), encoding="utf-8")
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
    try:
        pg = ctx.new_page()
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(path.as_uri())
        pg.wait_for_selector("#player .mp-header")
        frames = pg.evaluate(READ_FRAMES, trace.clock_length)
        assert not errors, errors
        return frames
    finally:
        ctx.close()


def number(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text)
    return int(m.group(1)) if m else None


def check_every_frame(frames: list[dict], trace: Trace) -> int:
    """The header's numbers = the charts' readouts = core/counts.py, at each frame; returns frames checked."""
    f = trace_counts(trace).per_forward
    checked = 0
    for s, fr in enumerate(frames):
        text, data, charts = fr["text"], fr["data"], fr["charts"]
        where = (s, text)
        if s == 0:
            assert "committed this step" not in text and "masks left" not in text, where
            continue
        k = s - 1
        committed = number(r"committed this step (\d+)", text)
        assert committed == int(data["committed"]) == f.committed[k], where
        assert int(data["tokens"]) + int(data["fillers"]) == committed, where
        assert (int(data["tokens"]), int(data["fillers"])) == (f.tokens[k], f.fillers[k]), where
        if f.fillers[k]:
            assert f"({f.tokens[k]} tokens + {f.fillers[k]} after end of text)" in text, where
        if "committed" in charts:
            assert charts["committed"]["values"] == [committed], where
            assert charts["committed"]["text"].startswith(str(committed)), where
        if trace.is_speculative:
            assert number(r"drafts verified (\d+)", text) == int(data["verified"]) == f.verified[k], where
            assert charts["drafts"]["values"] == [f.accepted[k]] and int(data["accepted"]) == f.accepted[k], where
            assert charts["drafts"]["text"] == f"{f.accepted[k]} of {f.verified[k]} verified", where
        elif trace.block_length:
            masks = number(r"masks left (\d+)", text)
            assert masks == int(data["masksLeft"]) == f.masks_left[k], where
            assert charts["masks_left"]["values"] == [masks] and charts["masks_left"]["text"] == str(masks), where
            assert fr["drawn"] == masks, where  # the text draws as many masked cells as the header counts
        else:
            regions = number(r"regions decoding (\d+)", text)
            assert regions == int(data["regions"]) == f.regions[k] == committed, where
            assert charts["lines"]["values"] == [regions], where
        checked += 1
    return checked


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_header_equals_the_charts_on_every_frame_of_a_bundled_trace(browser, tmp_path, path):
    trace = load(path)
    frames = frames_of(browser, tmp_path, trace)
    assert len(frames) == trace.clock_length + 1
    assert check_every_frame(frames, trace) == trace.clock_length


def test_header_equals_the_charts_on_every_frame_of_a_fresh_default_decode(browser, tmp_path, fresh):
    frames = frames_of(browser, tmp_path, fresh)
    assert check_every_frame(frames, fresh) == fresh.clock_length
    # the measured bug: forward 1 said "masks left 384 · committed this step 442" beside a chart of 480
    f = trace_counts(fresh).per_forward
    assert f.committed[0] == f.tokens[0] + f.fillers[0] and f.masks_left[-1] == 0


def test_a_blocks_last_step_leaves_no_masks(browser, tmp_path):
    """Lesson 4 (steps 4, static quota): masks left 480, 360, 240, 120, then 0 at step 4/4 (it said
    384: the next block's masks, opened after the step)."""
    trace = load(ROOT / "assets" / "lessons" / "nano.diffusion.steps-4.strategy-low-confidence-static.json.gz")
    frames = frames_of(browser, tmp_path, trace)
    first_block = [number(r"masks left (\d+)", fr["text"]) for fr in frames[1:5]]
    assert first_block[-1] == 0 and "step 4/4" in frames[4]["text"]
    assert first_block == sorted(first_block, reverse=True)
