"""The app in a real browser (Debian's Chromium through Playwright): decode, play, scrub, hover.

Skipped with a reason when /usr/bin/chromium or the playwright package is missing (`.ci/run`
installs Chromium). The app runs on random-weight nano twins (tests/ui_support.py).
"""

from __future__ import annotations

import json

from tests.test_views import HOSTILE, hostile
from tests.ui_support import (
    require_chromium,
    run_and_wait,
    upload,
    wait_for_result,
)

require_chromium()


def states(pg, root="#player") -> list[str]:
    return pg.eval_on_selector_all(f"{root} .token", "els => els.map(e => e.className)")


def test_decode_play_scrub_hover(page):
    page.click("#decode-run")
    wait_for_result(page, "#player", timeout=120_000)
    # the result is in view: the player sits beside the page, on the first screen
    page.wait_for_function("() => { const t = document.querySelector('#player').getBoundingClientRect().top;"
                           " return t >= 0 && t < 0.7 * window.innerHeight; }", timeout=5_000)
    n = len(states(page))
    assert n > 0
    # play from the start: token states change over time
    page.click("#player .play")
    page.wait_for_timeout(400)
    early = states(page)
    page.wait_for_timeout(1500)
    later = states(page)
    assert early != later, "playing did not change any token state"
    assert any("st-masked" in c or "st-ghost" in c or "st-unreached" in c for c in early)
    page.click("#player .play")  # pause
    # scrub to the last step: every token committed
    page.eval_on_selector("#player .mp-scrub", "el => { el.value = el.max; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    final = states(page)
    assert len(final) == n
    assert all(("st-done" in c or "st-now" in c) for c in final), [c for c in final if "st-done" not in c][:5]
    # scrub back to the start: nothing committed yet
    page.eval_on_selector("#player .mp-scrub", "el => { el.value = 0; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    assert not any("st-done" in c or "st-now" in c for c in states(page))
    assert "block 1/" in page.inner_text("#player .mp-header")
    # hover a token at a middle step: its top-5 alternatives appear
    page.eval_on_selector("#player .mp-scrub", "el => { el.value = Math.floor(el.max / 2); el.dispatchEvent(new Event('input', {bubbles: true})); }")
    token = page.locator("#player .token.st-done, #player .token.st-now, #player .token.st-ghost").first
    token.hover()
    tip = page.locator("#player .mp-tip")
    tip.wait_for(state="visible")
    assert tip.locator(".mp-topk li").count() >= 1
    assert "Top-5" in tip.inner_text()
    # click pins it, and the linked page box is highlighted
    token.click()
    assert page.locator("#player .mp-inspect .mp-topk li").count() >= 1
    assert page.locator("#player rect.mp-box.sel").count() == 1
    # downloads are offered: the trace and the offline replay
    downloads = page.inner_text("#decode-downloads").replace("\n", "")
    assert ".trace.json" in downloads and ".replay.html" in downloads


def test_wall_clock_and_keyboard(page):
    page.click("#decode-run")
    wait_for_result(page, "#player", timeout=120_000)
    page.select_option("#player .mp-clocksel", "wall")
    page.eval_on_selector("#player .mp-scrub", "el => { el.value = 0; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    assert "prefill" in page.inner_text("#player .mp-clock")
    page.focus("#player .mp")
    page.keyboard.press("End")
    assert all(("st-done" in c or "st-now" in c) for c in states(page))


def test_viewer_shows_model_markup_as_text(page, tmp_path):
    """A trace whose model text is HTML (an <img onerror>, a <script>) replays it as visible text."""
    from mudiff_viz.decoding.diffusion import decode_diffusion
    from mudiff_viz.decoding.settings import DecodeParams
    from tests.fixed_backend import FixedBackend, FixedPage

    backend = FixedBackend(seed=1, n_rows=2, eos_at={0: 11})
    trace = hostile(decode_diffusion(backend, FixedPage(), backend.regions(None),
                                     DecodeParams(block_length=8, steps=8, max_new_tokens=16)))
    path = tmp_path / "hostile.diffusion.json"
    trace.save(path)
    page.get_by_role("tab", name="Trace viewer").click()
    page.set_input_files("#trace-upload input[type=file]", str(path))
    wait_for_result(page, "#viewer-player", timeout=60_000)
    page.eval_on_selector("#viewer-player .mp-scrub", "el => { el.value = el.max; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    text = page.inner_text("#viewer-player .mp-text")
    assert HOSTILE in text.replace("\n", "")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#viewer-player .mp-text img, #viewer-player .mp-text script").count() == 0
    # the page image is unknown (no sample has this hash): the player says so and draws the text instead
    assert "page image not available" in page.inner_text("#viewer-player .mp-page-note")
    assert json.loads(json.dumps(HOSTILE)) == HOSTILE


def test_offline_replay_needs_no_network(browser, tmp_path):
    """The downloadable HTML replay plays from a file with every network request refused."""
    from mudiff_viz.decoding.diffusion import decode_diffusion
    from mudiff_viz.decoding.settings import DecodeParams
    from mudiff_viz.views.export import standalone_html
    from tests.fixed_backend import FixedBackend, FixedPage

    backend = FixedBackend(seed=3, n_rows=3, eos_at={1: 9})
    trace = decode_diffusion(backend, FixedPage(), backend.regions(None), DecodeParams(block_length=8, steps=4, max_new_tokens=16))
    path = tmp_path / "replay.html"
    path.write_text(standalone_html(trace), encoding="utf-8")
    ctx = browser.new_context()
    requests: list[str] = []

    def refuse(route):
        requests.append(route.request.url)
        route.abort()

    ctx.route("http*://**/*", refuse)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(path.as_uri())
    pg.wait_for_selector("#player .token")
    assert pg.locator("#player .token").count() == trace.n_tokens
    pg.keyboard.press("Home")
    pg.click("#player .play")
    pg.wait_for_timeout(300)
    assert not errors and not requests
    ctx.close()


def test_lesson_button_runs_in_its_own_player(page):
    """How it works: 'Blocks' opens on its recording; *Rerun live* plays both decodes (block 32 and 8)
    on one clock in the tab's own player (the Decode tab is left alone)."""
    page.get_by_role("tab", name="How it works").click()
    wait_for_result(page, "#lesson-player", timeout=60_000)  # the first view: lesson 1's recording
    run_and_wait(page, "#lesson-blocks", root="#lesson-player", timeout=60_000)
    run_and_wait(page, "#lesson-live", root="#lesson-player")
    assert page.get_by_role("tab", name="How it works").get_attribute("aria-selected") == "true"
    assert "Live run" in page.inner_text("#lesson-status")
    page.eval_on_selector("#lesson-player .mp-scrub", "el => { el.value = 1; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    # the tiny twins answer 24 tokens per line: one block of 32, or three blocks of 8
    headers = page.locator("#lesson-player .mp-header").all_inner_texts()
    assert "block 1/1" in headers[0] and "block 1/3" in headers[1], headers
    # the lesson's words now quote the live runs (issue 48): the longer pane's passes are the clock's
    import re

    clock = int(page.eval_on_selector("#lesson-player .mp-scrub", "el => +el.max"))
    text = page.inner_text("#lesson-text")
    passes = re.search(r"\((\d+) against (\d+)\)", text)
    assert passes and max(int(passes[1]), int(passes[2])) == clock, (clock, text)
    from mudiff_viz.ui import howitworks, lesson_recordings

    recorded = lesson_recordings.load_recording(next(x for x in howitworks.LESSONS if x.key == "blocks").runs[0])
    assert "…" not in text and "None" not in text
    assert f"{recorded.model.params_m:g}M parameters" not in text  # the test's tiny twins ran, not the recording's


def test_pdf_with_markup_in_its_text_shows_it_as_text(page, tmp_path):
    """A PDF whose text layer holds <script> and <img onerror>: the comparison's ground-truth diff and
    the player show it as text, and nothing runs."""
    import pymupdf

    doc = pymupdf.open()
    pg = doc.new_page(width=400, height=200)
    pg.insert_text((20, 60), "<script>window.__pwned=1</script>", fontname="cour", fontsize=11)
    pg.insert_text((20, 100), '<img src=x onerror="window.__pwned=2">', fontname="cour", fontsize=11)
    path = tmp_path / "markup.pdf"
    doc.save(str(path))
    page.get_by_role("tab", name="Compare AR vs diffusion").click()
    upload(page, "compare", path)  # in place of the preselected bundled sample
    page.click("#compare-run")
    wait_for_result(page, "#compare-player", timeout=120_000)
    page.wait_for_timeout(500)
    diff = page.inner_text("#compare-diff-diffusion").replace("\n", "")
    # the random-weight decode garbles line 1, so the diff interleaves it; line 2 is missing whole
    assert '<img src=x onerror="window.__pwned=2">' in diff and "<sc" in diff and "</scrip" in diff
    assert page.evaluate("window.__pwned") is None
    assert page.locator(".gradio-container img[src='x']").count() == 0


def test_a_visible_drop_zone_takes_a_new_page(page, tmp_path):
    """Before: the bundled sample filled the only upload box, so there was nowhere to drop a file.
    The empty zone under it is on screen, and a file given to it becomes the page (preview and all)."""
    import pymupdf

    zone = page.locator("#decode-drop")
    zone.scroll_into_view_if_needed()
    assert zone.is_visible() and zone.get_attribute("class") and "mudiff-drop" in zone.get_attribute("class")
    assert "drop" in zone.inner_text().lower()  # Gradio's empty upload area, not a file row
    doc = pymupdf.open()
    pg = doc.new_page(width=400, height=200)
    pg.insert_text((20, 60), "dropped page", fontname="cour", fontsize=14)
    path = tmp_path / "dropped-here.pdf"
    doc.save(str(path))
    page.set_input_files("#decode-drop input[type=file]", str(path))
    page.wait_for_function("() => document.querySelector('#decode-page-info').innerText.includes('dropped-here.pdf')",
                           timeout=30_000)
    assert "dropped-here.pdf" in page.inner_text("#decode-input").replace("\n", "")  # the page's box holds it now
    page.wait_for_function("() => !document.querySelector('#decode-drop').innerText.includes('dropped-here')",
                           timeout=10_000)  # and the zone is empty again, ready for the next one
