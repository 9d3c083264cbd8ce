"""The first screen, in a real browser, on the shipped models: a recorded decode plays at once, the
controls that matter are in sight, the rest folds away, and the small things a first visitor trips on."""

from __future__ import annotations

import pytest

from models import registry
from mudiff_viz.core.metrics import first_step_share
from mudiff_viz.ui import hero, models
from mudiff_viz.inputs.pages import load_page
from mudiff_viz.probes.perturb import page_words
from mudiff_viz.ui.pagework import preview_scale
from tests.ui_support import SAMPLE, app_page, launched_app, open_advanced, require_chromium

require_chromium()


@pytest.fixture(scope="module")
def shipped_app():
    """The app on the shipped nano weights (both pairs installed, as after a clone)."""
    with launched_app(registry.NANO_DIR) as url:
        yield url


def scrub_value(pg, root: str = "#player") -> int:
    return int(pg.eval_on_selector(f"{root} .mp-scrub", "el => el.value"))


def test_the_showcase_recording_reads_and_shows_diffusion_at_work():
    trace = hero.hero_trace()
    assert trace is not None, "the shipped recording is missing or no longer reads: run scripts/record_lessons.py"
    assert trace.metrics.cer <= hero.MAX_CER
    share = first_step_share(trace)
    assert hero.rejected_drafts(trace) > 0 or (share is not None and share <= hero.MAX_FIRST_STEP)
    line = hero.hero_line(trace)
    # every figure in the line is the recording's
    for figure in (f"{trace.metrics.tokens} tokens", f"{trace.clock_length} forward passes",
                   f"CER {100 * trace.metrics.cer:.1f}%", f"drafts {trace.params['draft_length']} tokens"):
        assert figure in line, figure


def test_the_first_run_is_the_showcase_model_when_installed():
    assert models.default_choice([("a", "nano"), ("b", "nano-subword")]) == ("nano-subword", "self-speculative")
    assert models.default_choice([("a", "nano")]) == ("nano", "diffusion")


def test_the_app_opens_playing_a_decode_in_the_first_screenful(browser, shipped_app):
    with app_page(browser, shipped_app) as pg:
        # no click: the player is on the first screen and moves by itself
        pg.wait_for_function("() => { const s = document.querySelector('#player .mp-scrub'); return s && +s.value > 0; }",
                             timeout=15_000)
        first = scrub_value(pg)
        pg.wait_for_function(f"() => +document.querySelector('#player .mp-scrub').value > {first}", timeout=10_000)
        top = pg.evaluate("() => document.querySelector('#player').getBoundingClientRect().top")
        assert 0 <= top < 1000
        for sel in ("#decode-run", "#decode-decoder", "#decode-input"):  # page, Run and the decoder choice too
            box = pg.locator(sel).bounding_box()
            assert box and box["y"] + 20 < 1000, sel
        status = pg.inner_text("#decode-status")
        assert "Watching a recorded decode" in status and "self-speculative" in status
        assert pg.locator("#decode-decoder input[value='self-speculative']").is_checked()
        # every other knob is folded away, one click from here
        assert not pg.locator("#decode-temperature").first.is_visible()
        open_advanced(pg)
        assert pg.locator("#decode-temperature").first.is_visible()
        # touching the player stops the showcase
        pg.click("#player .play")
        stopped = scrub_value(pg)
        pg.wait_for_timeout(800)
        assert scrub_value(pg) == stopped


def test_the_player_is_within_two_screens_on_a_phone(browser, shipped_app):
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    pg = ctx.new_page()
    try:
        pg.goto(shipped_app)
        pg.wait_for_selector("#player .mp-scrub", timeout=30_000)
        top = pg.evaluate("() => document.querySelector('#player').getBoundingClientRect().top + window.scrollY")
        assert top < 2 * 844
        # the sticky control bar never hides the pane's header: it stays in sight below the bar
        pg.eval_on_selector("#player .mp-pane-head", "el => el.scrollIntoView({block: 'start'})")
        pg.wait_for_timeout(300)
        bar = pg.locator("#player .mp > .mp-controls").first.bounding_box()
        head = pg.locator("#player .mp-pane-head").first.bounding_box()
        assert head["y"] >= bar["y"] + bar["height"] - 1
        pg.evaluate("() => window.scrollBy(0, 300)")
        pg.wait_for_timeout(300)
        bar = pg.locator("#player .mp > .mp-controls").first.bounding_box()
        head = pg.locator("#player .mp-pane-head").first.bounding_box()
        assert bar["y"] + bar["height"] - 1 <= head["y"] < 844
    finally:
        ctx.close()


def test_no_web_font_is_fetched_and_bold_text_has_a_real_face(browser, shipped_app):
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
    pg = ctx.new_page()
    fonts: list[str] = []
    pg.on("request", lambda r: fonts.append(r.url) if r.resource_type == "font" else None)
    try:
        pg.goto(shipped_app)
        pg.wait_for_selector("#player .mp-scrub", timeout=30_000)
        pg.wait_for_timeout(1000)
        assert fonts == []
        family = pg.evaluate("() => getComputedStyle(document.body).fontFamily")
        assert "Source Sans Pro" not in family
    finally:
        ctx.close()


def test_small_controls_read_as_what_they_are(page):
    open_advanced(page)
    more = page.locator("#decode-more-knobs .label-wrap").first
    text = more.inner_text()
    assert text.splitlines()[0].startswith("More knobs (")
    assert more.bounding_box()["height"] < 40  # one line, not three centred ones
    # the drop zone's words sit above it, not over its upload icon
    label = page.locator("#decode-drop-label").bounding_box()
    zone = page.locator("#decode-drop").bounding_box()
    assert label["y"] + label["height"] <= zone["y"] + 1


def test_a_click_on_the_preview_opens_the_perturb_panel(page):
    img = page.locator("#decode-preview img")
    img.wait_for(state="visible")
    page.wait_for_function("() => { const i = document.querySelector('#decode-preview img'); "
                           "return i && i.complete && i.naturalWidth > 0; }", timeout=30_000)
    assert not page.locator("#decode-occlude-words").first.is_visible()
    img.scroll_into_view_if_needed()
    box = page.evaluate("""() => { const i = document.querySelector('#decode-preview img');
        const r = i.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, nw: i.naturalWidth}; }""")
    sample = load_page(SAMPLE)
    word = page_words(sample)[0]  # the sample's first word, clicked with both panels closed
    k = preview_scale(sample) * box["w"] / box["nw"]
    page.mouse.click(box["x"] + (word.box[0] + word.box[2]) / 2 * k, box["y"] + (word.box[1] + word.box[3]) / 2 * k)
    page.wait_for_function("() => { const w = document.querySelector('#decode-occlude-words textarea, "
                           "#decode-occlude-words input'); return w && w.value.trim() !== ''; }", timeout=20_000)
    assert page.locator("#decode-occlude-words").first.is_visible()


def test_a_setup_sets_the_decoder_and_says_what_it_changed(page):
    page.click("#decode-setup-order")
    page.wait_for_function("() => document.querySelector('#decode-setup-note').innerText.includes('Watch the order')",
                           timeout=10_000)
    assert page.locator("#decode-decoder input[value='diffusion']").is_checked()
    open_advanced(page)
    assert "low_confidence_static" in page.locator("#decode-strategy").first.inner_text() or \
        page.locator("#decode-strategy input").first.input_value() == "low_confidence_static"
