"""No silent or stuck state (issue 48, item 5), in Chromium on the real app: a trace that does not
load leaves its reason on screen once; a Run click during a decode meets a Stop button, never
silence; a new file clears the last failure.

The app runs on random-weight nano twins with a long answer cap (tests/ui_support.py), so a decode
runs long enough to be stopped by hand.
"""

from __future__ import annotations

import time

import pytest

from tests.ui_support import SAMPLE, launched_app, make_tiny_twins, open_advanced, require_chromium, run_and_wait, upload

require_chromium()


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    """The app on tiny twins that may write 4096 tokens per region (one a forward at block length 4:
    about half a minute a page here), so a decode outlasts the click on Stop by far."""
    with launched_app(make_tiny_twins(tmp_path_factory.mktemp("models"), max_answer=4096)) as url:
        yield url


def visible_error_pills(pg, root: str) -> int:
    """Gradio's bare "Error" pills in sight under ``root``."""
    return pg.evaluate("""(root) => [...document.querySelectorAll(root + ' .error')]
        .filter(e => e.offsetParent !== null && e.innerText.trim() === 'Error').length""", root)


def set_number(pg, elem_id: str, value) -> None:
    if elem_id.startswith("decode-"):
        open_advanced(pg)  # the Decode tab folds its knobs away
    box = pg.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Tab")


def test_a_trace_that_does_not_load_leaves_its_reason_once(page, tmp_path):
    """Before: a toast "Error (2)" with the reason twice, then two red pills over "Loading the
    trace…" and no reason left on screen."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a trace"}')
    reason = "field 'schema_version' is missing"
    page.get_by_role("tab", name="Trace viewer").click()
    page.set_input_files("#trace-upload input[type=file]", str(bad))
    page.wait_for_function("() => document.querySelector('#viewer-status').innerText.includes('could not be loaded')",
                           timeout=30_000)
    shown = page.inner_text("#viewer-status") + "\n" + page.inner_text("#viewer-player")
    assert shown.count(reason) == 1, shown
    assert "Loading the trace" not in shown
    assert visible_error_pills(page, "#viewer-status") + visible_error_pills(page, "#viewer-player") == 0
    assert page.locator(".toast-body").count() == 0, "the upload's reason is on screen: a toast would say it twice"
    page.click("#trace-replay")  # the button (and the API) still raise, once
    page.wait_for_selector(".toast-body", timeout=30_000)
    assert page.locator(".toast-body").count() == 1
    assert "(2)" not in page.inner_text(".toast-wrap, .toast-body")
    page.wait_for_function("(r) => document.querySelector('#viewer-status').innerText.includes(r)", arg=reason,
                           timeout=30_000)
    shown = page.inner_text("#viewer-status") + "\n" + page.inner_text("#viewer-player")
    assert shown.count(reason) == 1, shown


def test_a_run_click_during_a_decode_meets_stop(page):
    """Before: a second Run click while a decode ran was dropped; the result was the first decoder's
    with the other decoder selected. Now Stop takes Run's place, ends the decode (its worker stops),
    and the next Run decodes with the decoder selected."""
    from mudiff_viz.ui import jobs

    cancelled = len(jobs.CANCELLATIONS)
    set_number(page, "decode-block-length", 4)
    set_number(page, "decode-max-new-tokens", 4096)
    page.click("#decode-run")
    page.wait_for_selector("#decode-stop", state="visible", timeout=30_000)
    assert not page.locator("#decode-run").is_visible(), "Run stays clickable while its click would be dropped"
    page.wait_for_function("() => { const m = document.querySelector('#player .mp-mount');"
                           " return !!m && m.dataset.partial === '1' && !!m.querySelector('.token'); }", timeout=60_000)
    page.locator("#decode-decoder").get_by_label("Autoregressive (AR)").check()
    page.click("#decode-stop")
    page.wait_for_function("() => document.querySelector('#decode-status').innerText.includes('Decode stopped')",
                           timeout=30_000)
    page.wait_for_selector("#decode-run", state="visible", timeout=10_000)
    assert not page.locator("#decode-stop").is_visible()
    # the player (its own script renders each value) says so too: no live badge left on a stopped decode
    page.wait_for_function("() => document.querySelector('#player').innerText.includes('Decode stopped')",
                           timeout=10_000)
    deadline = time.monotonic() + 60
    while len(jobs.CANCELLATIONS) == cancelled:  # the worker records its stop when it reaches the next block
        assert time.monotonic() < deadline, "the stopped decode's worker never stopped"
        page.wait_for_timeout(50)
    set_number(page, "decode-max-new-tokens", 24)
    run_and_wait(page, "#decode-run")
    page.wait_for_function("() => document.querySelector('#decode-status').innerText.startsWith('AR')", timeout=10_000)
    page.wait_for_selector("#decode-run", state="visible", timeout=10_000)  # Run is back once the decode ends
    assert not page.locator("#decode-stop").is_visible()


def test_a_comparison_can_be_stopped_and_its_run_click_is_never_dropped(page):
    """Compare had no Stop: a second click on Run while its decodes ran was dropped without a word."""
    page.get_by_role("tab", name="Compare AR vs diffusion").click()
    set_number(page, "compare-max-new-tokens", 4096)
    page.click("#compare-run")
    page.wait_for_selector("#compare-stop", state="visible", timeout=30_000)
    assert not page.locator("#compare-run").is_visible()
    page.wait_for_function("() => { const m = document.querySelector('#compare-player .mp-mount');"
                           " return !!m && m.dataset.partial === '1' && !!m.querySelector('.token'); }", timeout=60_000)
    page.click("#compare-stop")
    page.wait_for_function("() => document.querySelector('#compare-status').innerText.includes('Decode stopped')",
                           timeout=30_000)
    assert "Run AR, diffusion and draft-and-verify" in page.inner_text("#compare-status")
    page.wait_for_selector("#compare-run", state="visible", timeout=10_000)
    assert not page.locator("#compare-stop").is_visible()


def test_a_new_file_clears_the_last_failure(page, tmp_path):
    """Before: "⚠ The decode failed: empty file" stayed on screen while the next file was previewed."""
    bad = tmp_path / "empty.png"
    bad.write_bytes(b"")
    upload(page, "decode", bad, shows="⚠")
    page.click("#decode-run")
    page.wait_for_function("() => document.querySelector('#decode-status').innerText.includes('The decode failed')",
                           timeout=30_000)
    assert "empty file" in page.inner_text("#player")
    upload(page, "decode", SAMPLE)
    page.wait_for_function("() => !document.querySelector('#decode-status').innerText.includes('failed')"
                           " && !document.querySelector('#player').innerText.includes('failed')", timeout=30_000)
    assert "empty file" not in page.inner_text("#decode-status") + page.inner_text("#player")
    assert visible_error_pills(page, "#decode-status") + visible_error_pills(page, "#player") == 0
