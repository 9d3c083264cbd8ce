"""The Semantic Shuffle tab in Chromium: four panes render tokens and scrub on one clock; and an
error message that quotes an uploaded trace shows its markup as text.

Skipped with a reason when /usr/bin/chromium or the playwright package is missing. The app runs on
random-weight nano twins (tests/ui_support.py).
"""

from __future__ import annotations

import pytest

from tests.ui_support import (
    app_page,
    require_chromium,
    SAMPLE,
    upload,
)

require_chromium()

PLAYER = "#shuffle-player"
# each pane's frame and size, read from the player object the mount element holds
FRAMES = """el => el.__mudiffPlayer.panes.map(p => ({frame: p.frame, n: p.m.N}))"""


@pytest.fixture(scope="module")
def page(browser, app_url):
    """One tab for the whole module: the tests walk one Shuffle result in order."""
    with app_page(browser, app_url) as pg:
        yield pg


def scrub(pg, expr: str) -> None:
    pg.eval_on_selector(f"{PLAYER} .mp-scrub", f"el => {{ el.value = {expr}; el.dispatchEvent(new Event('input', {{bubbles: true}})); }}")


def pane_states(pg) -> list[list[str]]:
    return pg.eval_on_selector_all(f"{PLAYER} .mp-pane", "ps => ps.map(p => Array.from(p.querySelectorAll('.token'), t => t.className))")


def frames(pg) -> list[dict]:
    return pg.eval_on_selector(f"{PLAYER} .mp-mount", FRAMES)


def test_four_panes_render_and_scrub_together(page):
    page.get_by_role("tab", name="Semantic Shuffle").click()
    page.click("#shuffle-run")
    # finished panes play while the others decode; the result is the 2x2 grid
    page.wait_for_selector(f"{PLAYER} .mp-panes.mp-grid .token", timeout=180_000)
    titles = page.eval_on_selector_all(f"{PLAYER} .mp-pane-label", "els => els.map(e => e.textContent)")
    assert titles == ["diffusion · original page", "diffusion · shuffled page (level 1)", "AR · original page",
                      "AR · shuffled page (level 1)"]
    assert page.locator(f"{PLAYER} .mp-panes.mp-grid").count() == 1
    assert page.input_value(f"{PLAYER} .mp-colour") == "correct"  # errors against ground truth from the start
    assert "our reconstruction" in page.inner_text("#shuffle-status")
    # start: nothing committed in any pane
    scrub(page, "0")
    assert all(f["frame"] == 0 for f in frames(page))
    assert all(not any("st-done" in c or "st-now" in c for c in states) for states in pane_states(page))
    # a middle frame: every pane shows the same forward (or its own end, if it finished earlier)
    scrub(page, "Math.floor(el.max / 2)")
    k = int(page.eval_on_selector(f"{PLAYER} .mp-scrub", "el => Number(el.value)"))
    assert k > 0 and [f["frame"] for f in frames(page)] == [min(k, f["n"]) for f in frames(page)]
    # the end: everything committed everywhere, and right/wrong colours on the tokens
    scrub(page, "el.max")
    states = pane_states(page)
    assert len(states) == 4 and all(states)
    assert all(all("st-done" in c or "st-now" in c for c in pane) for pane in states)
    backgrounds = page.eval_on_selector_all(f"{PLAYER} .token", "els => new Set(els.map(e => e.style.background)).size")
    assert backgrounds >= 2  # random weights: some tokens right, some wrong
    # playing from the start moves all four panes on one clock
    page.keyboard.press("Escape")
    page.click(f"{PLAYER} .mp-btn.to-start")
    page.click(f"{PLAYER} .play")
    page.wait_for_timeout(700)
    page.click(f"{PLAYER} .play")
    fs = frames(page)
    s = page.eval_on_selector(f"{PLAYER} .mp-mount", "el => el.__mudiffPlayer.s")
    assert s > 0 and [f["frame"] for f in fs] == [min(s, f["n"]) for f in fs]
    # the further seeds' verdict, then the score table has both decoders
    page.wait_for_function("() => /over 3 seeds|on all 3 seeds/.test(document.querySelector('#shuffle-status').innerText)",
                           timeout=180_000)
    status = page.inner_text("#shuffle-status")
    assert "diffusion:" in status and "AR:" in status
    assert "diffusion" in page.inner_text("#shuffle-scores") and "AR" in page.inner_text("#shuffle-scores")


def test_error_toast_shows_markup_from_a_trace_as_text(page, tmp_path):
    """Trace errors can quote the upload (here its schema_version); Gradio's toast renders HTML, so
    the app escapes the message: the reader sees the text, and no element from the trace appears."""
    evil = '<img src=x onerror="window.__pwned=1"><b>bold</b>'
    path = tmp_path / "evil.json"
    path.write_text('{"schema_version": "%s"}' % evil.replace('"', '\\"'), encoding="utf-8")
    page.get_by_role("tab", name="Trace viewer").click()
    page.set_input_files("#trace-upload input[type=file]", str(path))
    # a dropped file's reason stays in the status line, as text
    page.wait_for_function("() => document.querySelector('#viewer-status').innerText.includes('could not be loaded')",
                           timeout=30_000)
    assert evil in page.inner_text("#viewer-status")
    assert page.locator("#viewer-status img, #viewer-status b").count() == 0
    page.click("#trace-replay")  # the button raises the same reason as a toast
    toast = page.locator("[data-testid=toast-text]").last
    toast.wait_for(timeout=30_000)
    assert evil in toast.inner_text() and "invalid trace: field 'schema_version'" in toast.inner_text()
    assert page.locator("[data-testid=toast-body] img, [data-testid=toast-body] b").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_a_failed_probe_run_ends_with_its_reason_on_screen(page, tmp_path):
    """As in the Decode tab (issue 29, item 2): a corrupt PDF leaves the one-line reason in the status
    and the grid once the toast has gone, no "Decoding four times" and no bare "Error" pills."""
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF-1.4 this is not really a pdf")
    page.get_by_role("tab", name="Semantic Shuffle").click()
    upload(page, "shuffle", bad, shows="⚠")
    page.click("#shuffle-run")
    page.locator(".toast-body").first.wait_for(timeout=30_000)
    page.wait_for_selector(".toast-body", state="detached", timeout=30_000)
    assert "damaged or truncated" in page.inner_text("#shuffle-status")
    failed = page.locator(f"{PLAYER} .mp-failed")
    assert failed.is_visible() and "damaged or truncated" in failed.inner_text()
    assert "Decoding four times" not in page.inner_text(PLAYER) and "Preparing" not in page.inner_text("#shuffle-status")
    assert page.locator(f"{PLAYER} .error:visible, #shuffle-status .error:visible").count() == 0
    assert page.locator("#shuffle-scores .error:visible").count() == 0  # nor on the emptied score table


def test_the_benchmark_reports_as_it_goes_and_stop_keeps_what_finished(page):
    """The benchmark's status counts decodes while it runs; Stop ends it after the decode in
    progress and shows what finished (summary, figure, table, downloads), marked partial; it frees
    the model slot: the next Shuffle run goes through."""
    page.get_by_role("tab", name="Semantic Shuffle").click()
    page.click("#shuffle-bench-run")
    page.wait_for_function("() => /[1-9]\\d* of \\d+ decodes\\s+done/.test(document.querySelector('#shuffle-bench-status').innerText)",
                           timeout=120_000)
    assert "Stop" in page.inner_text("#shuffle-bench-status")
    page.click("#shuffle-bench-stop")
    page.wait_for_function("() => document.querySelector('#shuffle-bench-status').innerText.includes('partial: stopped after')",
                           timeout=120_000)
    status = page.inner_text("#shuffle-bench-status")
    assert "diffusion: CER" in status and "ar: CER" in status
    page.wait_for_selector("#shuffle-bench-figure .js-plotly-plot", timeout=30_000)
    assert "partial:" in page.text_content("#shuffle-bench-figure")  # the figure's title says so too
    assert page.locator("#shuffle-bench-table").is_visible()
    table = page.inner_text("#shuffle-bench-table")
    assert "diffusion" in table and "AR" in table and "change (points)" in table
    assert page.locator("#shuffle-bench-files a").count() == 5
    upload(page, "shuffle", SAMPLE)
    page.click("#shuffle-run")
    page.wait_for_selector(f"{PLAYER} .mp-panes.mp-grid .token", timeout=180_000)
