"""The player (assets/player/src, joined by mudiff_viz/views/assets.py) in a real browser: Debian's Chromium through Playwright.

Each test writes a standalone replay (mudiff_viz.views.export) to a temporary folder, opens it, and
checks what a user sees: DOM states, text, bounding boxes. Traces come from the shipped character
model ("nano-char") on the bundled sample page, decoded once per module; a threshold of 0.999 makes
the confident model take several denoising steps per block, as a real model does on hard pages.
A second result or a streamed snapshot is handed to the same player with ``load`` or a second
``MudiffPlayer.mount`` on the same element, as the Gradio component does.
"""

from __future__ import annotations

import copy
import re

import pytest

from tests.ui_support import (
    SAMPLE,
    require_chromium,
)

require_chromium()

DESKTOP = {"width": 1400, "height": 1000}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def payloads():
    """Player payloads of real decodes of the sample page (plus the traces, for facts to check against)."""
    from mudiff_viz.decoding.pipeline import decode_page, make_params
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.probes.perturb import occlude
    from mudiff_viz.views.page_image import image_data_url
    from mudiff_viz.views.player import player_payload

    page = load_page(str(SAMPLE))
    image = image_data_url(page.image)
    slow = make_params(threshold=0.999)
    traces = {
        "batched": decode_page(page, model="nano-char", decoder="diffusion", params=slow),
        "sequential": decode_page(page, model="nano-char", decoder="diffusion", params=slow, batch_regions=False),
        "ar": decode_page(page, model="nano-char", decoder="ar"),
        "short": decode_page(page, model="nano-char", decoder="diffusion", params=make_params(threshold=0.999, max_new_tokens=32)),
    }
    occluded_page = occlude(page, words=[0, 3, 7]).page
    traces["occluded"] = decode_page(occluded_page, model="nano-char", decoder="diffusion", params=slow)
    out = {k: player_payload(t, image_url=image) for k, t in traces.items()}
    out["occluded"] = player_payload(traces["occluded"], image_url=image_data_url(occluded_page.image))
    out["traces"] = traces
    return out


class Opened:
    def __init__(self, browser, path, viewport, touch=False):
        self.ctx = browser.new_context(viewport=viewport, has_touch=touch, is_mobile=touch)
        self.pg = self.ctx.new_page()
        self.errors: list[str] = []
        self.pg.on("pageerror", lambda e: self.errors.append(str(e)))
        self.pg.goto(path.as_uri())
        self.pg.wait_for_selector("#player .token")

    def close(self):
        self.ctx.close()
        assert not self.errors, f"JavaScript errors: {self.errors}"


@pytest.fixture
def open_player(browser, tmp_path):
    """open_player(payload, name, viewport=DESKTOP, touch=False) -> page with the replay loaded."""
    opened: list[Opened] = []

    def run(payload, name="replay", viewport=DESKTOP, touch=False):
        from mudiff_viz.views.export import standalone_html_from_payload

        path = tmp_path / f"{name}.html"
        path.write_text(standalone_html_from_payload(payload, name), encoding="utf-8")
        o = Opened(browser, path, viewport, touch)
        opened.append(o)
        return o.pg

    yield run
    for o in opened:
        o.close()


def scrub(pg, frame):
    pg.eval_on_selector("#player .mp-scrub", "(el, v) => { el.value = v; el.dispatchEvent(new Event('input', {bubbles: true})); }", frame)


def load(pg, payload):
    """A second result in the same player, as the app does on a new value."""
    pg.evaluate("p => document.getElementById('player').__mudiffPlayer.load(p)", payload)


def header_counts(pg, root="#player .mp-pane"):
    text = pg.inner_text(f"{root} .mp-header")
    masks = re.search(r"masks left (\d+)", text)
    now = re.search(r"committed this step (\d+)", text)
    return (int(masks.group(1)) if masks else None), int(now.group(1)), text


def committed_tokens(p):
    s = p["slots"]
    return [i for i in range(len(s["region"])) if not s["filler"][i] and s["commit"][i] >= 0]


# ---- 1. a second result in the same player -------------------------------------------------------

def test_second_result_keeps_legend_ramp_and_clock(open_player, payloads):
    pg = open_player(payloads["batched"])
    assert pg.locator("#player .mp-legend").is_visible()
    pg.uncheck("#player .mp-ghosts")
    # run decode twice: a second (different) result, then the same trace replayed
    load(pg, payloads["sequential"])
    for _ in range(2):
        assert pg.locator("#player .mp-legend").count() == 1
        assert pg.locator("#player .mp-legend").is_visible()
        assert pg.locator("#player .mp-legend .mp-ramp").is_visible()
        assert "masked" in pg.inner_text("#player .mp-legend")
        n = payloads["sequential"]["clock"]["n"]
        assert pg.inner_text("#player .mp-clock").startswith(f"forward {n}/{n} · t = ")
        load(pg, payloads["sequential"])
    # options outlive a result, and the controls show them
    assert not pg.is_checked("#player .mp-ghosts")
    assert pg.evaluate("document.getElementById('player').__mudiffPlayer.opts.ghosts") is False
    # a second mount on the same element reuses the player
    same = pg.evaluate("""p => { const root = document.getElementById('player'); const before = root.__mudiffPlayer;
        return MudiffPlayer.mount(root, p) === before && root.__mudiffPlayer === before; }""", payloads["batched"])
    assert same
    assert pg.locator("#player .mp-legend .mp-ramp").is_visible()
    assert pg.inner_text("#player .mp-clock") != ""


# ---- 2. headers that agree with the screen; one opening frame -----------------------------------

def test_header_says_the_counts_the_charts_read(open_player, payloads):
    """One region at a time (like the real model): the header's masks left and committed this step
    are the payload's counts (core/counts.py), the numbers the charts read out, and the caption
    says 'no guess passed', never 'only 0'. Every frame of every bundled trace: test_counts_browser."""
    p = payloads["sequential"]
    pg = open_player(p)
    n = p["clock"]["n"]
    ser = p["series"]
    zero_above = [k + 1 for k in range(n) if ser["above"][k] == 0 and ser["committed"][k] > 0]
    assert zero_above, "the test trace needs a step where no guess passed the threshold"
    for frame in range(1, n + 1, max(1, n // 25)):
        scrub(pg, frame)
        masks, now, text = header_counts(pg)
        assert (masks, now) == (ser["masks_left"][frame - 1], ser["committed"][frame - 1]), (frame, text)
        read = pg.inner_text('#player .mp-chart[data-chart="masks_left"] .mp-chart-read')
        assert read == str(masks), (frame, text, read)
        caption = pg.inner_text("#player .mp-caption")
        assert "only 0" not in caption and " 0 guesses" not in caption, caption
    frame = zero_above[0]
    scrub(pg, frame)
    _, now, _ = header_counts(pg)
    caption = pg.inner_text("#player .mp-caption")
    most = "the most confident guess" if now == 1 else f"the {now} most confident"
    assert f"no guess passed the {p['threshold']} threshold, so the quota committed {most}" in caption, caption


def test_every_layout_opens_on_the_finished_result(open_player, payloads):
    from mudiff_viz.views.player import compare_payload

    single = open_player(payloads["batched"], "single")
    cmp = open_player(compare_payload([payloads["ar"], payloads["batched"]]), "compare")
    for pg in (single, cmp):
        value, top = pg.eval_on_selector("#player .mp-scrub", "el => [el.value, el.max]")
        assert value == top and int(top) > 0
        assert "Play" in pg.inner_text("#player .play")
        assert all("st-done" in c or "st-now" in c
                   for c in pg.eval_on_selector_all("#player .token", "els => els.map(e => e.className)"))
    # play from the end restarts from the start
    cmp.click("#player .play")
    cmp.wait_for_timeout(250)
    cmp.click("#player .play")
    value, top = cmp.eval_on_selector("#player .mp-scrub", "el => [Number(el.value), Number(el.max)]")
    assert value < top / 2


def test_block_wise_is_told_by_the_block_length_not_the_name(open_player, payloads):
    p = copy.deepcopy(payloads["batched"])
    p["decoder"] = "my-block-decoder"  # a registered decoder with another name
    pg = open_player(p)
    scrub(pg, 1)
    masks, now, text = header_counts(pg)
    assert text.startswith("block 1/") and masks is not None, text
    assert "token step" not in text
    assert pg.locator("#player .mp-chart[data-chart=masks_left]").count() == 1
    assert pg.locator("#player .mp-chart[data-chart=order]").count() == 1


# ---- 3. keyboard and readable charts --------------------------------------------------------------

def test_tokens_are_reachable_by_keyboard(open_player, payloads):
    pg = open_player(payloads["batched"])
    active = "() => { const a = document.activeElement; return a && a.dataset && a.dataset.i != null ? Number(a.dataset.i) : a.className; }"
    pg.focus("#player .mp-under")
    pg.keyboard.press("Tab")
    assert pg.evaluate(active) == "mp-text"  # the text box is one tab stop
    box = pg.locator("#player .mp-text")
    assert box.evaluate("e => getComputedStyle(e).outlineStyle") == "solid"
    pg.keyboard.press("ArrowRight")
    first = pg.evaluate(active)
    assert isinstance(first, int)
    tab_stops = pg.eval_on_selector_all("#player .mp-text [data-i]", "els => els.filter(e => e.tabIndex === 0).map(e => Number(e.dataset.i))")
    assert tab_stops == [first]
    assert box.get_attribute("tabindex") == "-1"
    token = pg.locator("#player .mp-text .token:focus")
    assert token.evaluate("e => getComputedStyle(e).outlineStyle") == "solid"
    assert token.evaluate("e => parseFloat(getComputedStyle(e).outlineWidth)") >= 2
    pg.keyboard.press("ArrowRight")
    second = pg.evaluate(active)
    assert second == first + 1
    line_of = "i => Number(document.querySelector(`#player .mp-text [data-i='${i}']`).closest('.mp-line').dataset.region)"
    y0 = pg.locator(f"#player .mp-text [data-i='{second}']").bounding_box()["y"]
    pg.keyboard.press("ArrowDown")
    below = pg.evaluate(active)
    assert pg.locator(f"#player .mp-text [data-i='{below}']").bounding_box()["y"] > y0
    pg.keyboard.press("End")
    end = pg.evaluate(active)
    assert pg.evaluate(line_of, end) == pg.evaluate(line_of, below) and end > below
    pg.keyboard.press("Home")
    assert pg.evaluate(line_of, pg.evaluate(active)) == pg.evaluate(line_of, below)
    # Enter pins the card exactly as a click does
    pg.keyboard.press("Enter")
    pinned = pg.evaluate(active)
    assert pg.locator("#player .mp-inspect.pinned .mp-topk li").count() >= 1
    assert pg.locator("#player rect.mp-box.sel").count() == 1
    assert pg.get_attribute(f"#player .mp-text [data-i='{pinned}']", "class").split().count("sel") == 1
    scrub_before = pg.eval_on_selector("#player .mp-scrub", "el => el.value")
    # Escape unpins and gives the focus back to the text box; arrows in the text never step the clock
    pg.keyboard.press("Escape")
    assert pg.locator("#player .mp-inspect.pinned").count() == 0
    assert pg.evaluate(active) == "mp-text"
    assert pg.eval_on_selector("#player .mp-scrub", "el => el.value") == scrub_before
    # the player's own shortcuts still work with the focus on the player
    pg.focus("#player")
    assert pg.evaluate("() => document.activeElement.id") == "player"
    assert pg.eval_on_selector("#player", "e => getComputedStyle(e).outlineStyle") == "solid"
    n = payloads["batched"]["clock"]["n"]
    pg.keyboard.press("ArrowLeft")
    assert pg.inner_text("#player .mp-clock").startswith(f"forward {n - 1}/{n}")
    pg.keyboard.press("Home")
    assert pg.inner_text("#player .mp-clock").startswith(f"forward 0/{n}")
    pg.keyboard.press(" ")
    pg.wait_for_timeout(300)
    pg.keyboard.press(" ")
    assert not pg.inner_text("#player .mp-clock").startswith(f"forward 0/{n}")
    # no focusable thing of the player hides its focus ring
    from mudiff_viz.views.export import player_css

    assert not re.search(r"outline:\s*(none|0)\b", player_css())


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_chart_labels_are_at_least_11px(open_player, payloads, viewport):
    from mudiff_viz.views.player import compare_payload

    pg = open_player(compare_payload([payloads["ar"], payloads["occluded"]]), viewport=viewport, touch=viewport is PHONE)
    sizes = pg.evaluate("""() => {
        const out = [];
        document.querySelectorAll('#player .mp-charts *').forEach(e => {
            const own = [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
            if (!own) return;
            let px = parseFloat(getComputedStyle(e).fontSize);
            if (e instanceof SVGElement) { const m = e.getScreenCTM(); px *= Math.min(Math.abs(m.a), Math.abs(m.d)); }
            out.push([e.textContent.trim().slice(0, 30), px]);
        });
        return out;
    }""")
    assert len(sizes) >= 10
    small = [(t, round(px, 1)) for t, px in sizes if px < 11]
    assert not small, small
    labels = pg.inner_text("#player .mp-charts")
    assert "forward" in labels and "threshold 0.999" in labels


# ---- 4. phone ------------------------------------------------------------------------------------

OVERFLOW = """() => {
    // the visible right edge of every element of the player (clipped by the boxes that scroll it)
    const vw = document.documentElement.clientWidth, root = document.getElementById('player'), bad = [];
    root.querySelectorAll('*').forEach(e => {
        const r = e.getBoundingClientRect();
        if (!r.width && !r.height) return;
        let right = r.right;
        for (let a = e.parentElement; a && a !== root.parentElement; a = a.parentElement) {
            const s = getComputedStyle(a);
            if (s.overflowX !== 'visible') right = Math.min(right, a.getBoundingClientRect().right);
        }
        if (right > vw + 0.5) bad.push(`${e.tagName}.${e.getAttribute('class')} ${Math.round(right)}`);
    });
    return [vw, document.documentElement.scrollWidth, bad.slice(0, 10)];
}"""


def test_phone_layout(open_player, payloads):
    from mudiff_viz.views.player import compare_payload

    for name, p in (("single", payloads["batched"]), ("compare", compare_payload([payloads["ar"], payloads["batched"]]))):
        pg = open_player(p, name, viewport=PHONE, touch=True)
        vw, scroll_w, bad = pg.evaluate(OVERFLOW)
        assert scroll_w <= vw and not bad, (name, bad)
        pane = pg.locator("#player .mp-pane").first
        page_box, text_box = pane.locator(".mp-page").bounding_box(), pane.locator(".mp-text").bounding_box()
        # the page stacks above the text, at full width, at a scale where its text reads
        assert page_box["y"] + page_box["height"] <= text_box["y"] + 1
        assert page_box["width"] >= 0.95 * text_box["width"]
        heights = pane.locator("rect.mp-box").evaluate_all("els => els.map(e => e.getBoundingClientRect().height).sort((a, b) => a - b)")
        assert heights[len(heights) // 2] >= 16, heights[len(heights) // 2]
        # the wall-time strip: its prefill/decode readout wraps inside the player
        for row in pg.locator("#player .mp-strip-row").all():
            box = row.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= vw
        info = pg.locator("#player .mp-strip-info").first
        assert info.is_visible() and "prefill" in info.inner_text()
        # a tapped token: its card docks under the text (no floating tooltip over the lines)
        token = pane.locator(".mp-text .token").nth(40)
        token.scroll_into_view_if_needed()
        token.tap()
        card = pg.locator("#player .mp-inspect.pinned")
        card.wait_for(state="visible")
        assert not pg.locator("#player .mp-tip").is_visible()
        text_box = pane.locator(".mp-text").bounding_box()
        cb = card.bounding_box()
        line_h = pane.locator(".mp-text").evaluate("e => parseFloat(getComputedStyle(e).lineHeight)")
        overlap = max(0, min(cb["y"] + cb["height"], text_box["y"] + text_box["height"]) - max(cb["y"], text_box["y"]))
        assert overlap <= 3 * line_h, (cb, text_box)
        assert cb["y"] < PHONE["height"], "the card is below the screen"
        tb = token.bounding_box()
        assert tb["y"] >= 0 and tb["y"] + tb["height"] <= PHONE["height"], "the tapped token scrolled away"
        assert cb["x"] >= 0 and cb["x"] + cb["width"] <= vw
        close = card.locator(".mp-d-close")
        assert close.is_visible() and close.bounding_box()["height"] >= 30
        vw, scroll_w, bad = pg.evaluate(OVERFLOW)
        assert scroll_w <= vw and not bad, (name, bad)
        close.tap()
        assert pg.locator("#player .mp-inspect.pinned").count() == 0


# ---- 5. occlusion probe ---------------------------------------------------------------------------

def test_occluded_words_are_marked(open_player, payloads):
    p = copy.deepcopy(payloads["occluded"])
    assert len(p["page"]["occluded"]) == 3
    # the nano model skips the blanked words (no token aligns to them): flag the first word of
    # line 3 as a model that guessed a blanked word would have it
    s = p["slots"]
    flagged = [i for i in range(len(s["region"])) if s["region"][i] == 2 and s["pos"][i] < 3 and not s["filler"][i]]
    for i in flagged:
        s["occluded"][i] = 1
    pg = open_player(p)
    outlines = pg.locator("#player rect.mp-occ")
    assert outlines.count() == 3
    img = pg.locator("#player .mp-page-img").bounding_box()
    for k in range(3):
        r = outlines.nth(k)
        assert r.evaluate("e => getComputedStyle(e).strokeDasharray") not in ("none", "")
        b = r.bounding_box()
        assert b["width"] > 4 and b["height"] > 4
        assert img["x"] <= b["x"] and b["x"] + b["width"] <= img["x"] + img["width"] + 1
    for i in flagged:
        t = pg.locator(f"#player .mp-text [data-i='{i}']")
        assert "occ" in t.get_attribute("class").split()
        assert t.evaluate("e => getComputedStyle(e).borderBottomStyle") == "dashed"
    plain = pg.locator("#player .mp-text .token:not(.occ)").first
    assert plain.evaluate("e => getComputedStyle(e).borderBottomStyle") == "none"
    pg.locator(f"#player .mp-text [data-i='{flagged[0]}']").click()
    assert "this word was blanked on the page (occlusion probe)" in pg.inner_text("#player .mp-inspect").lower()
    assert "occlusion probe" in pg.inner_text("#player .mp-legend")
    # a trace without occlusions has no such legend entry and no outline
    load(pg, payloads["batched"])
    assert "occlusion probe" not in pg.inner_text("#player .mp-legend")
    assert pg.locator("#player rect.mp-occ").count() == 0


# ---- 6. decoding order chart ----------------------------------------------------------------------

def test_decoding_order_chart_follows_the_scrubber(open_player, payloads):
    for name in ("batched", "sequential", "occluded"):  # slots.open is the forward at which the block opened
        p, t = payloads[name], payloads["traces"][name]
        first = {}
        for st in t.steps:
            first[(st.region, st.block)] = min(first.get((st.region, st.block), st.forward), st.forward)
        s, L = p["slots"], p["block_length"]
        for i in committed_tokens(p):
            assert s["open"][i] == first[(s["region"][i], s["pos"][i] // L)]
    p = copy.deepcopy(payloads["occluded"])
    s = p["slots"]
    tokens = committed_tokens(p)
    for i in tokens[5:12]:  # as in the occlusion test: the real model skipped the blanked words
        s["occluded"][i] = 1
    pg = open_player(p)
    chart = pg.locator("#player .mp-chart[data-chart=order]")
    assert chart.is_visible()
    n = p["clock"]["n"]
    step = {i: s["commit"][i] - s["open"][i] + 1 for i in tokens}
    L = p["block_length"]
    first, last = {}, {}  # denoising steps each block took, from the trace's step records
    for st in payloads["traces"]["occluded"].steps:
        key = (st.region, st.block)
        first[key] = min(first.get(key, st.forward), st.forward)
        last[key] = max(last.get(key, st.forward), st.forward)
    block_steps = {k: last[k] - first[k] + 1 for k in first}
    assert any(step[i] > 1 for i in tokens) and any(step[i] == block_steps[(s["region"][i], s["pos"][i] // L)] > 1 for i in tokens)
    nodes_before = pg.evaluate("document.querySelectorAll('#player *').length")
    pg.evaluate("""() => { window.__added = 0; new MutationObserver(ms => ms.forEach(m => m.addedNodes.forEach(x => {
        if (x.nodeType === 1) window.__added++; }))).observe(document.querySelector('#player .mp-panes'), {childList: true, subtree: true});
        new MutationObserver(ms => ms.forEach(m => m.addedNodes.forEach(x => { if (x.nodeType === 1) window.__added++; })))
            .observe(document.querySelector('#player .mp-charts'), {childList: true, subtree: true}); }""")
    for frame in sorted({0, 1, 2, n // 2, n - 1, n}):
        scrub(pg, frame)
        upto = [i for i in tokens if s["commit"][i] < frame]
        now = [i for i in tokens if s["commit"][i] == frame - 1]
        assert chart.locator("svg.mp-chart-svg rect.mp-dot:not(.off)").count() == len(upto), frame
        assert chart.locator("svg.mp-chart-svg rect.mp-dot.now").count() == len(now), frame
        read = chart.locator(".mp-chart-read").inner_text()
        if upto:
            k = sum(1 for i in upto if step[i] == 1)
            assert f"({k}/{len(upto)})" in read and "first step" in read, read
            occ = [i for i in upto if s["occluded"][i]]
            if occ:
                at_last = sum(1 for i in occ if step[i] == block_steps[(s["region"][i], s["pos"][i] // L)])
                assert f"{at_last}/{len(occ)} tokens at their block's last step" in read, read
        else:
            assert "no token committed yet" in read
    # scrubbing rebuilds nothing: the same elements, restyled
    assert pg.evaluate("window.__added") == 0
    assert pg.evaluate("document.querySelectorAll('#player *').length") == nodes_before
    assert chart.locator("svg.mp-chart-svg rect.mp-dot.occ").count() == 7
    # a late step is drawn above a first step, a late position right of position 0
    dots = chart.locator("svg.mp-chart-svg rect.mp-dot").evaluate_all("els => els.map(e => { const r = e.getBoundingClientRect(); return [r.x, r.y]; })")
    order = sorted(tokens, key=lambda i: (s["commit"][i], i))
    late = max(range(len(order)), key=lambda j: step[order[j]])
    early = next(j for j in range(len(order)) if step[order[j]] == 1)
    assert dots[late][1] < dots[early][1]
    for label in ("step 1", f"step {max(step.values())}", "position 0", f"position {p['block_length'] - 1}"):
        assert label in chart.inner_text()
    # AR: no blocks, no chart
    load(pg, payloads["ar"])
    assert pg.locator("#player .mp-chart[data-chart=order]").count() == 0


# ---- 7. streamed snapshots -----------------------------------------------------------------------

def test_streamed_snapshots_keep_the_users_place(open_player, payloads):
    from mudiff_viz.views.player import player_payload

    traces = payloads["traces"]
    image = payloads["batched"]["page"]["image"]

    def snap(trace, stream, partial):
        return player_payload(trace, image_url=image, partial=partial, stream=stream)

    first, last = snap(traces["short"], "s1", True), snap(traces["batched"], "s1", False)
    n1, n2 = first["clock"]["n"], last["clock"]["n"]
    assert 2 < n1 < n2
    pg = open_player(first)
    badge = pg.locator("#player .mp-live")
    assert badge.is_visible() and "decoding" in badge.inner_text() and "live" in badge.inner_text()
    # the user steps back, colours by commit step, pins a token and focuses it
    scrub(pg, 2)
    pg.select_option("#player .mp-colour", "commit")
    token = pg.locator("#player .mp-text .token.st-done").nth(3)
    i = int(token.get_attribute("data-i"))
    key = (first["slots"]["region"][i], first["slots"]["pos"][i])
    token.click()
    pg.evaluate("""() => { window.__empty = 0; document.querySelector('#player .mp-page-img').__old = true;
        new MutationObserver(ms => ms.forEach(m => m.addedNodes.forEach(x => { if (x.nodeType === 1 && (x.matches('.mp-empty') || x.querySelector('.mp-empty'))) window.__empty++; })))
            .observe(document.getElementById('player'), {childList: true, subtree: true}); }""")
    same = pg.evaluate("""p => { const root = document.getElementById('player'); const before = root.__mudiffPlayer;
        return MudiffPlayer.mount(root, p) === before; }""", last)
    assert same
    assert pg.eval_on_selector("#player .mp-scrub", "el => [Number(el.value), Number(el.max)]") == [2, n2]
    assert pg.inner_text("#player .mp-clock").startswith(f"forward 2/{n2}")
    assert pg.eval_on_selector("#player .mp-colour", "el => el.value") == "commit"
    assert not badge.is_visible()
    sel = pg.locator("#player .mp-text .sel")
    assert sel.count() == 1
    j = int(sel.get_attribute("data-i"))
    assert (last["slots"]["region"][j], last["slots"]["pos"][j]) == key
    assert pg.locator("#player .mp-inspect.pinned").is_visible()
    assert pg.evaluate("() => document.activeElement.dataset.i") == str(j)
    assert pg.evaluate("window.__empty") == 0
    assert pg.evaluate("document.querySelector('#player .mp-page-img').__old") is True  # no image reload (no blank frame)
    # following the end: a new snapshot moves to the new end ("live"); load says it kept the place
    kept = "p => document.getElementById('player').__mudiffPlayer.load(p)"
    assert pg.evaluate(kept, snap(traces["short"], "s2", True)) is False
    assert pg.eval_on_selector("#player .mp-scrub", "el => [Number(el.value), Number(el.max)]") == [n1, n1]
    assert pg.evaluate(kept, snap(traces["batched"], "s2", True)) is True
    assert pg.eval_on_selector("#player .mp-scrub", "el => [Number(el.value), Number(el.max)]") == [n2, n2]
    assert badge.is_visible()
    # playing goes on playing, from where it was
    load(pg, snap(traces["short"], "s3", True))
    pg.select_option("#player .mp-speed", "1")
    scrub(pg, 0)
    pg.click("#player .play")
    load(pg, snap(traces["batched"], "s3", False))
    assert "playing" in pg.get_attribute("#player .play", "class")
    assert pg.eval_on_selector("#player .mp-scrub", "el => Number(el.value)") <= 1
    assert pg.eval_on_selector("#player .mp-speed", "el => el.value") == "1"
    # another decode (another stream) is a new result: it opens on its last frame
    load(pg, snap(traces["sequential"], "s4", False))
    n4 = payloads["sequential"]["clock"]["n"]
    assert pg.eval_on_selector("#player .mp-scrub", "el => [Number(el.value), Number(el.max)]") == [n4, n4]
    assert "playing" not in pg.get_attribute("#player .play", "class")


def test_a_cut_decode_says_where_in_the_pane_title(open_player, payloads, tmp_path):
    """A region that stopped at its token limit (metrics.truncated) is named in the pane's title;
    a decode that finished every line shows no such note."""
    cut = payloads["traces"]["short"].metrics.truncated
    assert cut and cut.startswith("cut at 32 tokens")
    pg = open_player(payloads["short"], "short")
    assert pg.inner_text("#player .mp-pane-title .mp-cut") == f"⚠ {cut}"
    assert pg.locator("#player .mp-pane-title .mp-cut").is_visible()
    pg.screenshot(path=str(tmp_path / "cut.png"))
    assert payloads["traces"]["batched"].metrics.truncated is None
    pg = open_player(payloads["batched"], "batched")
    assert pg.locator("#player .mp-cut").count() == 0
