"""The players' "Download animation" buttons in a real browser: a click makes a GIF of what plays above."""

from __future__ import annotations

import io
import urllib.request

from PIL import Image

from mudiff_viz.core.trace import Trace
from tests.ui_support import require_chromium, wait_for_result

require_chromium()


def fetched_gif(pg, files: str) -> Image.Image:
    """The first .gif the file list at ``files`` links to, fetched from the app as a browser would."""
    pg.wait_for_function(f"() => [...document.querySelectorAll('{files} a')].some(a => a.href.includes('.gif'))",
                         timeout=120_000)
    href = pg.eval_on_selector_all(f"{files} a", "as => as.map(a => a.href).find(h => h.includes('.gif'))")
    with urllib.request.urlopen(href, timeout=30) as r:
        return Image.open(io.BytesIO(r.read()))


def test_viewer_example_downloads_as_a_gif(page):
    page.get_by_role("tab", name="Trace viewer").click()
    page.click("#trace-example-diffusion")
    wait_for_result(page, "#viewer-player", timeout=60_000)
    assert page.locator("#viewer-animation a").count() == 0
    page.click("#viewer-gif")
    gif = fetched_gif(page, "#viewer-animation")
    trace = Trace.load("assets/traces/courier-short.diffusion.json")
    assert gif.format == "GIF" and gif.n_frames == trace.clock_length + 1
    assert gif.width == 960


def test_decode_result_downloads_as_a_gif_over_its_own_page(page, tmp_path):
    page.click("#decode-run")
    wait_for_result(page, "#player", timeout=120_000)
    page.click("#decode-gif")
    gif = fetched_gif(page, "#decode-animation")
    assert gif.n_frames >= 2
    # drawn over the decoded page, not a blank one: the page panel holds dark ink (the sample's text)
    first = gif.convert("L")
    x0, y0 = 10, 30
    panel = first.crop((x0, y0, x0 + 400, y0 + 400))
    assert min(panel.getdata()) < 80


def test_animation_before_any_result_is_one_line(page):
    page.get_by_role("tab", name="Trace viewer").click()
    page.click("#viewer-gif")
    toast = page.locator(".toast-body").first
    toast.wait_for(timeout=30_000)
    assert "nothing to animate yet" in toast.inner_text()


def test_a_lesson_downloads_as_gifs_of_its_recorded_runs(page):
    page.get_by_role("tab", name="How it works").click()
    wait_for_result(page, "#lesson-player", timeout=60_000)
    page.click("#lesson-blocks")  # two panes: block 32 and block 8
    page.wait_for_function("() => document.querySelector('#lesson-text').innerText.includes('Blocks')", timeout=30_000)
    page.click("#lesson-gif")
    page.wait_for_function("() => [...document.querySelectorAll('#lesson-animation a')]"
                           ".filter(a => a.href.includes('.gif')).length >= 2", timeout=120_000)
    hrefs = page.eval_on_selector_all("#lesson-animation a", "as => as.map(a => a.href)")
    assert sum("lesson-blocks" in h for h in hrefs) == 2, hrefs
