"""Links that open a view, in a real browser: a lesson or a trace at a frame, and "Copy link to this frame"."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.ui.links import parse_link
from mudiff_viz.ui.opening import LESSON_KEYS
from tests.ui_support import app_page, require_chromium, wait_for_result

require_chromium()


def scrub(pg, root: str) -> int:
    return int(pg.eval_on_selector(f"{root} .mp-scrub", "el => el.value"))


def copied_link(pg, root: str) -> dict:
    pg.click(f"{root} .mp-copy-link")
    link = pg.eval_on_selector(f"{root} .mp-copy-link", "b => b.dataset.link")
    return {k: v[0] for k, v in parse_qs(urlparse(link).query).items()}


def test_a_link_opens_a_lesson_at_a_frame(browser, app_url):
    with app_page(browser, f"{app_url}?lesson=blocks&frame=3") as pg:
        wait_for_result(pg, "#lesson-player", timeout=60_000)
        assert "2 · Blocks" in pg.locator("#lesson-text").inner_text()
        assert pg.get_by_role("tab", name="How it works").get_attribute("aria-selected") == "true"
        assert scrub(pg, "#lesson-player") == 3
        # the frame on screen is the link's: copying it gives the same lesson and frame back
        assert copied_link(pg, "#lesson-player") == {"lesson": "blocks", "frame": "3"}
        pg.click("#lesson-player .step-fwd")
        assert copied_link(pg, "#lesson-player") == {"lesson": "blocks", "frame": "4"}


def test_a_link_opens_a_bundled_trace_and_an_upload_gets_its_own(browser, app_url):
    with app_page(browser, f"{app_url}?trace=courier-short.diffusion&frame=2") as pg:
        wait_for_result(pg, "#viewer-player", timeout=60_000)
        assert pg.get_by_role("tab", name="Trace viewer").get_attribute("aria-selected") == "true"
        assert scrub(pg, "#viewer-player") == 2
        assert copied_link(pg, "#viewer-player") == {"trace": "courier-short.diffusion", "frame": "2"}
        # an uploaded trace is kept by the server under its hash: its link reopens it
        pg.set_input_files("#trace-upload input[type=file]", "assets/traces/courier-short.ar.json")
        pg.wait_for_function("() => document.querySelector('#viewer-player .mp-header') && "
                             "document.querySelector('#viewer-player').innerText.includes('AR')", timeout=60_000)
        link = copied_link(pg, "#viewer-player")
    assert link["trace"].startswith("upload-") or link["trace"] == "courier-short.ar"
    with app_page(browser, f"{app_url}?trace={link['trace']}&frame={link['frame']}") as pg:
        wait_for_result(pg, "#viewer-player", timeout=60_000)
        assert scrub(pg, "#viewer-player") == int(link["frame"])


def test_a_bad_link_is_one_line_and_the_app_still_works(browser, app_url):
    with app_page(browser, f"{app_url}?lesson=nosuch&frame=1") as pg:
        toast = pg.locator(".toast-body").first
        toast.wait_for(timeout=30_000)
        assert "link: no lesson 'nosuch'" in toast.inner_text()
        pg.get_by_role("tab", name="Trace viewer").click()
        pg.click("#trace-example-diffusion")
        wait_for_result(pg, "#viewer-player", timeout=60_000)


@pytest.mark.parametrize("params, reason", [
    ({"frame": "-1"}, "frame must be a whole number"),
    ({"lesson": "masks", "trace": "x"}, "not both"),
    ({"trace": "../etc/passwd"}, "trace must be one or two trace names"),
    ({"trace": "a,b,c"}, "trace must be one or two trace names"),
])
def test_malformed_links_are_refused(params, reason):
    with pytest.raises(UserInputError, match=reason):
        parse_link(params, LESSON_KEYS)
