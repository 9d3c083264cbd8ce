"""The app as people use it, in Chromium: page choice, previews, failed runs, warnings, samples,
the Perturb panel, streaming, and the phone layout (issue 16's list, each a check that failed on
the app before its fix).

The app runs on random-weight nano twins (tests/ui_support.py): every decode is nonsense, which is
what the out-of-range warning is for.
"""

from __future__ import annotations

import os

import pytest

from tests.ui_support import (
    open_advanced,
    require_chromium,
    run_and_wait,
    upload,
    wait_for_result,
)

require_chromium()


@pytest.fixture(scope="module")
def three_pages(tmp_path_factory):
    """A 3-page PDF whose pages look different (so a preview of page 3 is not page 1's)."""
    import pymupdf

    doc = pymupdf.open()
    for k in range(3):
        pg = doc.new_page(width=420, height=300)
        for line in range(k * 4 + 2):
            pg.insert_text((30, 40 + 18 * line), f"Page {k + 1} line {line + 1} of the three page test file",
                           fontname="cour", fontsize=11)
    path = tmp_path_factory.mktemp("pdf") / "three-pages.pdf"
    doc.save(str(path))
    return path


def choose_page(pg, prefix: str, number: int) -> None:
    box = pg.locator(f"#{prefix}-page input[type=number]")
    box.fill(str(number))
    box.press("Tab")


def preview_src(pg, prefix: str) -> str:
    return pg.eval_on_selector(f"#{prefix}-preview img", "img => img.src")


def info(pg, prefix: str) -> str:
    return pg.inner_text(f"#{prefix}-page-info")


@pytest.mark.parametrize("prefix,tab", [("decode", "Decode"), ("compare", "Compare AR vs diffusion"),
                                        ("shuffle", "Semantic Shuffle")])
def test_choosing_a_page_updates_the_preview_at_once(page, three_pages, prefix, tab):
    """Typing a page number redraws that tab's preview and info line (no Enter, no Run)."""
    page.get_by_role("tab", name=tab).click()
    upload(page, prefix, three_pages)
    assert "page 1 of 3" in info(page, prefix)
    first = preview_src(page, prefix)
    choose_page(page, prefix, 3)
    page.wait_for_function(f"() => document.querySelector('#{prefix}-page-info').innerText.includes('page 3 of 3')",
                           timeout=20_000)
    page.wait_for_function(f"(old) => document.querySelector('#{prefix}-preview img').src !== old", arg=first,
                           timeout=20_000)


def test_preview_errors_say_why(page, three_pages, tmp_path):
    upload(page, "decode", three_pages)
    choose_page(page, "decode", 150)
    page.wait_for_function("() => document.querySelector('#decode-page-info').innerText.includes('does not exist')",
                           timeout=20_000)
    assert "page 150 does not exist: the PDF has 3 pages" in info(page, "decode")
    assert page.locator(".toast-body, .error").count() == 0  # a reason in words, not an error pill
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF-1.4 this is not really a pdf")
    upload(page, "decode", bad, shows="⚠ broken.pdf")
    assert "damaged or truncated" in info(page, "decode")


def test_a_failed_run_clears_the_previous_result(page, tmp_path):
    run_and_wait(page, "#decode-run")
    assert page.locator("#player .token").count() > 0
    assert "CER" in page.inner_text("#decode-status")
    bad = tmp_path / "empty.png"
    bad.write_bytes(b"")
    upload(page, "decode", bad, shows="⚠")
    page.click("#decode-run")
    page.wait_for_selector(".toast-body", timeout=30_000)
    assert "empty file" in page.inner_text(".toast-body")
    assert page.locator("#player .token").count() == 0, "the old result is still on screen"
    assert "CER" not in page.inner_text("#decode-status")
    assert page.locator("#decode-downloads a").count() == 0


def test_nonsense_gets_a_warning(page):
    """The random twins write nonsense at low confidence: the result says so above the player."""
    run_and_wait(page, "#decode-run")
    warning = page.locator("#decode-warning")
    warning.wait_for(state="visible", timeout=10_000)
    assert "probably not a reading of the page" in warning.inner_text()


def test_second_decode_keeps_the_legend(page):
    for _ in range(2):
        run_and_wait(page, "#decode-run")
    page.wait_for_timeout(300)
    assert page.locator("#player .mp-legend").count() == 1
    assert page.locator("#player .mp-legend").is_visible()


def set_number(pg, elem_id: str, value) -> None:
    open_advanced(pg, elem_id.split("-")[0])
    box = pg.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Tab")


def test_samples_keep_the_settings(page):
    """Clicking a bundled sample fills in the page only: decoder, block length, threshold stay."""
    set_number(page, "decode-block-length", 8)
    set_number(page, "decode-threshold", 0.5)
    page.locator("#decode-decoder").get_by_label("Autoregressive (AR)").check()  # hides the diffusion knobs
    page.get_by_text("helvetica-page.pdf").first.click()
    page.wait_for_function("() => document.querySelector('#decode-page-info').innerText.includes('helvetica-page.pdf')",
                           timeout=30_000)
    page.wait_for_timeout(500)
    assert page.locator("#decode-decoder").get_by_label("Autoregressive (AR)").is_checked()
    page.locator("#decode-decoder").get_by_label("Diffusion", exact=True).check()
    assert page.locator("#decode-block-length input[type=number]").input_value() == "8"
    assert page.locator("#decode-threshold input[type=number]").input_value() == "0.5"


def test_clicking_a_word_occludes_it_and_the_player_outlines_it(page):
    open_advanced(page)
    page.click("#decode-perturb button, #decode-perturb .label-wrap")  # open the Perturb panel
    img = page.locator("#decode-preview img")
    img.wait_for(state="visible")
    page.wait_for_function("() => { const i = document.querySelector('#decode-preview img'); return i && i.complete && i.naturalWidth > 0; }",
                           timeout=30_000)  # visible is not loaded: naturalWidth is 0 until the image arrives
    img.scroll_into_view_if_needed()  # opening the panel (below the knobs) scrolled the preview up, off the screen
    # the first word of the sample: its box from the page's text layer, in preview pixels
    box = page.evaluate("""() => { const i = document.querySelector('#decode-preview img');
        const r = i.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height, nw: i.naturalWidth}; }""")
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.probes.perturb import page_words
    from mudiff_viz.ui.pagework import preview_scale
    from tests.ui_support import SAMPLE

    sample = load_page(SAMPLE)
    word = page_words(sample)[0]
    k = preview_scale(sample) * box["w"] / box["nw"]  # page pixels -> preview pixels -> screen pixels
    cx, cy = (word.box[0] + word.box[2]) / 2 * k, (word.box[1] + word.box[3]) / 2 * k
    page.mouse.click(box["x"] + cx, box["y"] + cy)
    words = page.locator("#decode-occlude-words textarea, #decode-occlude-words input").first
    page.wait_for_function("(el) => el.value.trim() === '0'", arg=words.element_handle(), timeout=10_000)
    page.wait_for_function("() => document.querySelector('#decode-page-info').innerText.includes('1 word chosen')",
                           timeout=10_000)
    run_and_wait(page, "#decode-run")
    assert page.locator("#player .mp-occ").count() == 1  # the occluded word, outlined on the page


def test_the_player_plays_while_the_page_decodes(page):
    """Streaming: the live badge shows a frame of the decode before its result arrives."""
    page.evaluate("""() => { window.__sawLive = false;
        new MutationObserver(() => { const b = document.querySelector('#player .mp-live');
          if (b && !b.hidden && document.querySelector('#player .token')) window.__sawLive = true; })
          .observe(document.body, {subtree: true, childList: true, attributes: true}); }""")
    set_number(page, "decode-block-length", 4)
    run_and_wait(page, "#decode-run")
    assert page.evaluate("() => window.__sawLive"), "no frame was shown before the decode finished"


def test_phone_layout_has_no_overlap(browser, app_url):
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True,
                              has_touch=True)
    pg = ctx.new_page()
    pg.goto(app_url)
    pg.wait_for_selector(".gradio-container")
    run_and_wait(pg, "#decode-run")
    pg.wait_for_timeout(500)
    # nothing wider than the screen
    width = pg.evaluate("() => document.scrollingElement.scrollWidth")
    assert width <= 392, width
    # every slider's number box shows its whole value (the "Max tokens" box showed "409" of 4096)
    clipped = pg.evaluate("""() => [...document.querySelectorAll('#decode input[type=number], .gradio-container input[type=number]')]
        .filter(i => i.offsetParent && i.scrollWidth > i.clientWidth + 1).map(i => i.value)""")
    assert not clipped, clipped
    # figure titles are labels above the plots, not text under plotly's toolbar
    assert pg.evaluate("() => document.querySelectorAll('.js-plotly-plot .gtitle').length") == 0
    ctx.close()


@pytest.fixture(scope="module")
def corpus_store(app_url, tmp_path_factory):
    """A small store decoded by the app's own (tiny) twins: two bundled pages, both decoders."""
    from mudiff_viz.corpus.runner import run_corpus
    from tests.ui_support import ROOT

    store = tmp_path_factory.mktemp("corpus") / "store"
    samples = ROOT / "assets" / "samples"
    run_corpus([str(samples / "courier-short.pdf"), str(samples / "helvetica-page.pdf")], store, models="nano",
               knobs={"max_new_tokens": 16, "block_length": 8, "steps": 8})
    old = os.environ.get("MUDIFF_CORPUS_ROOTS")
    os.environ["MUDIFF_CORPUS_ROOTS"] = str(store.parent)  # the tab opens stores only under configured roots
    yield store
    if old is None:
        os.environ.pop("MUDIFF_CORPUS_ROOTS", None)
    else:
        os.environ["MUDIFF_CORPUS_ROOTS"] = old


def test_corpus_tab_plays_the_clicked_page(page, corpus_store):
    page.get_by_role("tab", name="Corpus").click()
    page.fill("#corpus-path textarea, #corpus-path input", str(corpus_store))
    page.click("#corpus-open")
    page.wait_for_function("() => document.querySelector('#corpus-status').innerText.includes('4 decoded pages')",
                           timeout=60_000)
    point = page.locator("#corpus-fig-cer-by-level .scatterlayer .point").first
    point.wait_for(state="visible", timeout=60_000)  # plotly.js, served by the app itself
    point.click(force=True)
    wait_for_result(page, "#corpus-player", timeout=60_000)
    assert "page" in page.inner_text("#corpus-page-status")


def test_release_settings_and_our_defaults_buttons_set_the_knobs(page):
    """The Decode tab's preset buttons: the release's demo values, then ours back (docs/real-models.md)."""
    def value(name: str) -> str:
        return page.locator(f"#decode-{name} input[type=number]").input_value()

    set_number(page, "decode-block-length", 8)
    page.locator("#decode-preset-release").click()
    page.wait_for_function("() => document.querySelector('#decode-temperature input[type=number]').value === '1'",
                           timeout=10_000)
    assert (value("block-length"), value("steps"), value("threshold"), value("max-new-tokens")) == ("32", "32", "0.95",
                                                                                                    "4096")
    page.get_by_text("More knobs", exact=False).first.click()  # the folded knobs
    assert page.locator("#decode-preset input").input_value() == "release"  # recorded: an AR model runs as shipped
    assert page.locator("#decode-straighten input").input_value() == "the model's own"
    page.locator("#decode-preset-defaults").click()
    page.wait_for_function("() => document.querySelector('#decode-temperature input[type=number]').value === '0'",
                           timeout=10_000)
    assert (value("block-length"), value("max-new-tokens")) == ("32", "1024")


def test_compare_states_a_verdict_and_every_chart_names_each_decoder_in_its_own_colour(page):
    """A Compare run (AR, diffusion, self-speculative; two interleaved rounds by default): the
    verdict names the forwards and seconds of decode of each, who is faster on wall time with the
    spread over the rounds, and why; every chart of the player has a legend with one entry per
    decoder, each in its own colour, and the whole-run figures name each decoder once."""
    page.get_by_role("tab", name="Compare AR vs diffusion").click()
    run_and_wait(page, "#compare-run", "#compare-player", timeout=240_000)
    verdict = page.inner_text("#compare-verdict")
    lines = [line for line in verdict.splitlines() if " finished in " in line]
    assert [line.split(" finished in ")[0].strip("•-* ") for line in lines] == ["diffusion", "self-speculative"], verdict
    for line in lines:
        assert " s of decode" in line and "AR in " in line and "fewer forwards" in line or "more forwards" in line
        assert "faster on wall time" in line or "no winner on wall time" in line
        assert "over 2 rounds" in line or "the same in all 2 rounds" in line
        assert "AR forwards here" in line
    assert "2 rounds, interleaved" in verdict
    legends = page.eval_on_selector_all(
        "#compare-player .mp-chart .mp-chart-legend",
        "ls => ls.map(l => Array.from(l.querySelectorAll('.mp-key-item'), "
        "k => [k.innerText.trim(), getComputedStyle(k.querySelector('line')).stroke]))")
    charts = page.locator("#compare-player .mp-chart:not([data-chart=order])").count()
    assert charts >= 3 and len(legends) == charts
    for entries in legends:
        assert [name for name, _ in entries] == ["AR", "diffusion", "self-speculative"]
        assert len({colour for _, colour in entries}) == 3, entries
    # the chart lines are drawn in the legend's colours
    strokes = page.eval_on_selector_all("#compare-player .mp-chart[data-chart=progress] path.mp-series",
                                        "ps => ps.map(p => getComputedStyle(p).stroke)")
    assert strokes == [colour for _, colour in legends[0]][:len(strokes)] and len(set(strokes)) == 3
    page.wait_for_selector("#compare-fig-forward .legendtext", timeout=30_000)
    names = page.eval_on_selector_all("#compare-fig-forward .legendtext", "ts => ts.map(t => t.textContent)")
    assert names == ["AR", "diffusion", "self-speculative"]
