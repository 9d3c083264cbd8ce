"""The two-stage parse in the player, in Chromium: the layout pass as its own recorded decode, the
blocks' boxes drawn on the page image once it has ended, and the region bar that moves the player
from region to region (chips, previous / next, a click on a box or a line number).

The trace is a real two-stage decode of a tiny MinerU-Diffusion checkpoint in the official layout
whose layout answer is scripted by its weights (tests/test_real_models.py write_layout_checkpoint:
the sample page's title, paragraph, bullet list and last line), so the layout parse finds four
blocks and the recognition passes decode three of them (a list groups other blocks: it is shown,
not read, as MinerU2.5's client does).
"""

from __future__ import annotations

import pytest

from tests.ui_support import SAMPLE, require_chromium, region_view as shown

require_chromium()

DESKTOP = {"width": 1400, "height": 1000}
LAYOUT_KNOBS = {"mode": "layout", "block_length": 8, "steps": 8, "max_new_tokens": 8}  # 8 tokens, 8 steps a pass


@pytest.fixture(scope="module")
def two_stage(tmp_path_factory):
    import torch

    from models.registry import load_backend
    from mudiff_viz.decoding.pipeline import decode_page, make_params
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.views.page_image import image_data_url
    from mudiff_viz.views.player import player_payload
    from tests.test_real_models import write_layout_checkpoint

    torch.set_num_threads(1)
    ckpt = write_layout_checkpoint(tmp_path_factory.mktemp("mineru-diffusion-layout"))
    page = load_page(str(SAMPLE))
    backend = load_backend(str(ckpt), "diffusion")
    trace = decode_page(page, params=make_params(**LAYOUT_KNOBS), backend=backend)
    plain = decode_page(page, model="nano-char", decoder="diffusion", params=make_params(max_new_tokens=16))
    image = image_data_url(page.image)
    return trace, player_payload(trace, image_url=image), player_payload(plain, image_url=image), backend


@pytest.fixture
def opened(browser, tmp_path):
    from mudiff_viz.views.export import standalone_html_from_payload

    pages, errors = [], []

    def run(payload, name="replay", viewport=DESKTOP):
        path = tmp_path / f"{name}.html"
        path.write_text(standalone_html_from_payload(payload, name), encoding="utf-8")
        ctx = browser.new_context(viewport=viewport)
        pg = ctx.new_page()
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(path.as_uri())
        pg.wait_for_selector("#player .mp-pane")
        pages.append(ctx)
        return pg

    yield run
    for ctx in pages:
        ctx.close()
    assert not errors, f"JavaScript errors: {errors}"


def test_the_payload_records_each_regions_stretch_of_the_clock(two_stage):
    trace, payload, plain, _ = two_stage
    stg = payload["stages"]
    assert "stages" not in plain  # a single-stage trace's payload is what it was
    assert [r["kind"] for r in payload["regions"]] == ["layout", "title", "text", "list", "text"]
    assert [r["task"] for r in stg["regions"]] == ["layout", "text", "text", None, "text"]
    lay, title, text, listed, last = stg["regions"]
    # the layout pass first, then the blocks back to back on one clock; the list is not decoded
    assert lay["first"] == 0 and lay["last"] + 1 == title["first"] and title["last"] + 1 == text["first"]
    assert text["last"] + 1 == last["first"] and last["last"] == trace.clock_length - 1
    assert listed["first"] is None and listed["last"] is None
    assert lay["last"] > lay["first"]  # several denoising steps: the layout pass is a recorded decode of its own


def blocks_on_image(pg) -> list[dict]:
    """The blocks' boxes as drawn: region, kind, classes and whether they lie on the page image."""
    return pg.evaluate("""() => {
        const img = document.querySelector('#player .mp-page-img').getBoundingClientRect();
        return Array.from(document.querySelectorAll('#player rect.mp-block')).map(r => {
            const b = r.getBoundingClientRect();
            return {region: Number(r.dataset.region), kind: r.dataset.kind, cls: r.getAttribute('class'),
                    w: b.width, h: b.height,
                    inside: b.width > 0 && b.left >= img.left - 1 && b.right <= img.right + 1 && b.top >= img.top - 1 && b.bottom <= img.bottom + 1};
        });
    }""")


def test_the_layout_boxes_are_drawn_on_the_page_once_the_layout_pass_has_ended(opened, two_stage):
    trace, payload, _, _ = two_stage
    pg = opened(payload)
    boxes = blocks_on_image(pg)
    assert [(b["region"], b["kind"]) for b in boxes] == [(1, "title"), (2, "text"), (3, "list"), (4, "text")]
    assert all(b["inside"] and b["w"] > 5 and b["h"] > 5 for b in boxes), boxes
    labels = pg.eval_on_selector_all("#player .mp-block-label", "ts => ts.map(t => t.textContent)")
    assert labels == ["1 title", "2 text", "3 list (not read)", "4 text"]
    # the box of a block lies where the layout answer put it (0-1000 units over the page)
    title = payload["regions"][1]["bbox"]
    assert title == pytest.approx([105 / 1000 * trace.page.width, 82 / 1000 * trace.page.height,
                                   250 / 1000 * trace.page.width, 115 / 1000 * trace.page.height], abs=0.2)
    # during the layout pass the blocks are not known yet: not drawn
    pg.click("#player .mp-btn.to-start")
    assert all("mp-pending" in b["cls"] and b["w"] == 0 for b in blocks_on_image(pg))
    assert pg.eval_on_selector("#player .mp-block-labels", "g => getComputedStyle(g).display") == "none"
    end = payload["stages"]["regions"][0]["last"]
    pg.eval_on_selector("#player .mp-scrub", "(el, v) => { el.value = v; el.dispatchEvent(new Event('input', {bubbles: true})); }", end + 1)
    assert all("mp-pending" not in b["cls"] and b["w"] > 0 for b in blocks_on_image(pg))


def test_the_region_bar_moves_between_regions(opened, two_stage):
    trace, payload, _, _ = two_stage
    stg = payload["stages"]["regions"]
    pg = opened(payload)
    chips = pg.eval_on_selector_all("#player .mp-region-chip", "cs => cs.map(c => c.textContent)")
    assert chips == ["Layout pass", "1 title", "2 text", "3 list", "4 text"]
    start = shown(pg)
    assert start["pressed"] == [] and start["line"] == [] and "Choose a region" in start["note"]
    assert pg.is_enabled("#player .mp-region-prev") and pg.is_enabled("#player .mp-region-next")
    pg.click("#player .mp-region-next")  # nothing chosen: the first region, the layout pass
    layout = shown(pg)
    assert layout["pressed"] == ["0"] and layout["line"] == ["0"] and layout["box"] == ["0"]
    assert layout["clock"].startswith(f"forward {stg[0]['last'] + 1}/{trace.clock_length} ")
    assert "Layout pass" in layout["note"] and "found 4 blocks" in layout["note"]
    assert pg.is_disabled("#player .mp-region-prev")
    pg.click("#player .mp-region-next")
    title = shown(pg)
    assert title["pressed"] == ["1"] and title["line"] == ["1"] and title["box"] == ["1"]
    assert title["clock"].startswith(f"forward {stg[1]['last'] + 1}/") and title["clock"] != layout["clock"]
    assert title["note"].startswith("Block 1 of 4 · title")
    assert len(title["text"]) > len(layout["text"])  # the title's tokens are drawn now, not yet at the layout's end
    assert 0 <= title["lineAt"] < 20, title["lineAt"]  # its line starts at the top of the text box, in sight
    # a click on a block's box chooses its region
    pg.click("#player rect.mp-block[data-region='2']", force=True)
    text = shown(pg)
    assert text["pressed"] == ["2"] and text["box"] == ["2"] and text["clock"].startswith(f"forward {stg[2]['last'] + 1}/")
    assert f"{payload['regions'][2]['n']} tokens" in text["note"]
    # the list: shown, not read; the clock goes to where its box appeared
    pg.click("#player .mp-region-next")
    listed = shown(pg)
    assert listed["pressed"] == ["3"] and "shown, not read" in listed["note"]
    assert listed["clock"].startswith(f"forward {stg[0]['last'] + 1}/")
    pg.click("#player .mp-region-next")
    assert shown(pg)["pressed"] == ["4"] and pg.is_disabled("#player .mp-region-next")
    # the keyboard: [ goes back; a line number chooses its region too
    pg.focus("#player")
    pg.keyboard.press("[")
    assert shown(pg)["pressed"] == ["3"]
    pg.click("#player .mp-line[data-region='1'] .mp-lineno")
    assert shown(pg)["pressed"] == ["1"]


def test_a_single_stage_trace_has_no_region_bar(opened, two_stage):
    _, _, plain, _ = two_stage
    pg = opened(plain)
    assert pg.locator("#player .mp-stages").count() == 0
    assert pg.locator("#player .mp-block, #player .mp-block-label, #player .mp-line-kind").count() == 0
    numbers = pg.eval_on_selector_all("#player .mp-lineno", "ns => ns.map(n => n.textContent)")
    assert numbers == [str(i + 1) for i in range(len(plain["regions"]))]
    assert pg.eval_on_selector_all("#player rect.mp-region", "rs => rs.every(r => /^mp-region rs-\\d$/.test(r.getAttribute('class')))")


def test_a_streamed_two_stage_decode_keeps_the_chosen_region(opened, two_stage):
    """Snapshots of a decode still running (the blocks after the current one not decoded yet) and
    then the finished result, under one stream id: the region bar is rebuilt and the choice kept."""
    from mudiff_viz.decoding.pipeline import decode_page, make_params
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.views.player import player_payload

    _, final, _, backend = two_stage
    builders = []
    decode_page(load_page(str(SAMPLE)), params=make_params(**LAYOUT_KNOBS), backend=backend, snapshot=builders.append)
    snaps = [b() for b in builders]
    mid = next(s for s in snaps if s.regions[2].tokens and not s.regions[4].tokens)  # the paragraph decoding
    partial = player_payload(mid, image_url=final["page"]["image"], partial=True, stream="s1")
    assert partial["stages"]["regions"][4]["last"] is None
    pg = opened(partial)
    pg.click("#player .mp-region-chip[data-region='4']")
    assert "not decoded yet" in shown(pg)["note"]
    pg.click("#player .mp-region-chip[data-region='1']")
    kept = pg.evaluate("p => document.getElementById('player').__mudiffPlayer.load(p)", {**final, "stream": "s1"})
    assert kept is True
    after = shown(pg)
    assert after["pressed"] == after["line"] == after["box"] == ["1"]
    assert pg.locator("#player .mp-stages").count() == 1
    assert pg.eval_on_selector("#player .mp-region-chip[data-region='4']", "c => c.classList.contains('undecoded')") is False


def test_a_layout_pass_that_finds_no_block_plays_alone(opened, tmp_path):
    """A random checkpoint's layout answer parses to no block: the trace is the layout pass alone,
    and the bar says so (nothing to move to)."""
    from models.registry import load_backend
    from mudiff_viz.decoding.pipeline import decode_page, make_params
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.views.player import player_payload
    from tests.test_real_models import write_diffusion_checkpoint

    backend = load_backend(str(write_diffusion_checkpoint(tmp_path / "random")), "diffusion")
    trace = decode_page(load_page(str(SAMPLE)), params=make_params(**LAYOUT_KNOBS), backend=backend)
    assert trace.params["layout_blocks"] == 0 and [r.kind for r in trace.regions] == ["layout"]
    pg = opened(player_payload(trace))
    assert pg.inner_text("#player .mp-stages-sub") == "a layout pass that found no block"
    pg.click("#player .mp-region-next")
    assert shown(pg)["pressed"] == ["0"] and "It found no block." in shown(pg)["note"]
    assert pg.is_disabled("#player .mp-region-next") and pg.is_disabled("#player .mp-region-prev")
    assert pg.locator("#player rect.mp-block").count() == 0
