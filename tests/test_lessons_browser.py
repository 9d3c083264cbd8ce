"""The How-it-works tab in Chromium, on an app with no embedded model installed: every lesson shows
its first frame from its shipped recording (no model can run), says which model and decoder it
uses, and *Rerun live* ends with the one-line reason a live run cannot happen here."""

from __future__ import annotations

import time

import pytest

from tests.ui_support import app_page, launched_app, player_loads, require_chromium, wait_for_result

require_chromium()


@pytest.fixture(scope="module")
def empty_app_url(tmp_path_factory):
    with launched_app(tmp_path_factory.mktemp("no-models")) as url:
        yield url


@pytest.fixture
def page(browser, empty_app_url):
    with app_page(browser, empty_app_url) as pg:
        yield pg


def test_every_lesson_shows_its_recording_at_once_with_no_model(page):
    from mudiff_viz.ui import howitworks, lesson_recordings

    page.get_by_role("tab", name="How it works").click()
    wait_for_result(page, "#lesson-player", timeout=120_000)  # the first view opens lesson 1 by itself
    times = {}
    for lesson in howitworks.LESSONS:
        before = player_loads(page, "#lesson-player")
        t0 = time.perf_counter()
        page.click(f"#lesson-{lesson.key}")
        wait_for_result(page, "#lesson-player", timeout=120_000, after=before)
        times[lesson.key] = round(time.perf_counter() - t0, 2)
        traces = [lesson_recordings.load_recording(r) for r in lesson.runs]
        assert page.locator("#lesson-player .mp-pane").count() == len(traces)
        assert page.locator("#lesson-player .token").count() == sum(t.n_tokens for t in traces)
        assert "Recorded run" in page.inner_text("#lesson-status")
        text = page.inner_text("#lesson-text")
        assert lesson.title in text
        for run in lesson.runs:
            assert howitworks.DECODER_NAMES[run.decoder] in text and run.family in text
        # its figures are filled from the recordings on screen (issue 48), none left blank or raw
        assert "…" not in text and "None" not in text and "nan" not in text.split()
        if lesson.key == "blocks":
            assert f"({traces[1].clock_length} against {traces[0].clock_length})" in text
    print("first frame after a lesson's click (s):", times)


def test_rerun_live_says_why_it_cannot_run_here(page):
    page.get_by_role("tab", name="How it works").click()
    wait_for_result(page, "#lesson-player", timeout=120_000)
    words = page.inner_text("#lesson-text")
    page.click("#lesson-live")
    page.wait_for_function("() => document.querySelector('#lesson-status').innerText.includes('not installed')",
                           timeout=120_000)
    assert page.inner_text("#lesson-text") == words  # the failed rerun leaves the lesson's words as they were


def test_lesson_2_header_and_caption_count_the_same_commits(page):
    """Issue 36: the block-8 pane's header said "committed this step 32" while its caption said 56."""
    import re

    page.get_by_role("tab", name="How it works").click()
    wait_for_result(page, "#lesson-player", timeout=120_000)
    before = player_loads(page, "#lesson-player")
    page.click("#lesson-blocks")
    wait_for_result(page, "#lesson-player", timeout=120_000, after=before)
    n = int(page.eval_on_selector("#lesson-player .mp-scrub", "el => +el.max"))
    checked = 0
    for frame in range(1, n + 1):
        page.eval_on_selector("#lesson-player .mp-scrub",
                              f"el => {{ el.value = {frame}; el.dispatchEvent(new Event('input', {{bubbles: true}})); }}")
        headers = page.locator("#lesson-player .mp-header").all_inner_texts()
        captions = page.locator("#lesson-player .mp-caption").all_inner_texts()
        for header, caption in zip(headers, captions):
            if not caption.startswith(f"Forward {frame}:"):
                continue  # a pane that finished earlier keeps its last step
            now = int(re.search(r"committed this step (\d+)", header)[1])
            said = re.search(r"all (\d+) guesses|the (1) guess|(\d+) positions? over", caption)
            if said:
                assert int(next(g for g in said.groups() if g)) == now, (frame, header, caption)
                checked += 1
    assert checked >= n
