"""Draft states in the player, in real Chromium, on a real self-speculative decode.

The shipped subword pair's diffusion twin decodes the bundled sample page self-speculatively (it
drafts the next positions in one forward and verifies them in its next one), 24 tokens a line, so
the page is small. Facts to check come from the trace's own step records (core/trace.py verdicts):
a position drafted at one forward shows a draft ghost on the next frame; on the frame of the forward
that verified it, it is accepted, or struck through and replaced by the verifier's token; the
token card lists its drafts and verdicts.
"""

from __future__ import annotations

import pytest

from mudiff_viz.core.trace import ACCEPTED, DRAFTED, REJECTED
from tests.test_player_browser import DESKTOP, PHONE, Opened, scrub
from tests.ui_support import SAMPLE, require_chromium

require_chromium()


@pytest.fixture(scope="module")
def spec():
    from mudiff_viz.decoding.pipeline import decode_page, make_params
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.views.page_image import image_data_url
    from mudiff_viz.views.player import player_payload

    page = load_page(str(SAMPLE))
    trace = decode_page(page, "nano-subword", "self-speculative", make_params(draft_length=4, max_new_tokens=24))
    return trace, player_payload(trace, image_url=image_data_url(page.image))


@pytest.fixture
def opened(browser, tmp_path, spec):
    from mudiff_viz.views.export import standalone_html_from_payload

    path = tmp_path / "spec.html"
    path.write_text(standalone_html_from_payload(spec[1], "self-speculative"), encoding="utf-8")
    o = Opened(browser, path, DESKTOP)
    yield o.pg
    o.close()


def shown(trace, token_id: int) -> str:
    """A token's text as the player writes it in a span (newlines get a visible mark)."""
    return trace.token_text(token_id).replace("\n", "↵\n")


def verdict_cases(trace, payload, verdict: int) -> list[dict]:
    """Positions the trace verified with ``verdict``: the slot, the forward that drafted what was
    verified there and the draft, the verifying forward and the token it committed."""
    slot = {(r, p): i for i, (r, p) in enumerate(zip(payload["slots"]["region"], payload["slots"]["pos"]))}
    last_draft: dict[tuple[int, int], tuple[int, int]] = {}
    out = []
    for s in sorted(trace.steps, key=lambda s: s.forward):
        for p, v, cand, d in zip(s.positions, s.verdicts, s.candidates, s.drafts):
            key = (s.region, p)
            if v == verdict and key in last_draft and last_draft[key][1] == d:
                text = trace.token_text(cand)
                if text.strip() and "\n" not in text and not text.startswith("<"):
                    out.append({"i": slot[key], "drafted_at": last_draft[key][0], "draft": d, "verified_at": s.forward,
                                "token": cand})
        for p, v, cand in zip(s.positions, s.verdicts, s.candidates):
            if v == DRAFTED:
                last_draft[(s.region, p)] = (s.forward, cand)
    return out


def span(pg, i: int) -> dict:
    return pg.eval_on_selector(f"#player .mp-text [data-i='{i}']", """e => ({
        cls: e.className, text: e.textContent, draft: e.dataset.draft === undefined ? null : e.dataset.draft,
        struck: getComputedStyle(e, '::before').textDecorationLine, before: getComputedStyle(e, '::before').content})""")


def box_class(pg, i: int) -> str | None:
    return pg.evaluate(f"() => {{ const r = document.querySelector(\"#player .mp-boxes [data-i='{i}']\"); return r ? r.getAttribute('class') : null; }}")


def test_a_draft_is_a_ghost_then_struck_through_and_replaced(opened, spec):
    trace, payload = spec
    pg = opened
    rejected = verdict_cases(trace, payload, REJECTED)
    assert rejected, "the decode rejected no draft: nothing to show"
    c = rejected[0]
    assert c["draft"] != c["token"]
    scrub(pg, c["drafted_at"] + 1)  # the outcome of the forward that drafted it
    s = span(pg, c["i"])
    assert "st-draft" in s["cls"].split() and s["text"] == shown(trace, c["draft"]) and s["draft"] is None
    if box_class(pg, c["i"]) is not None:
        assert "st-draft" in box_class(pg, c["i"]).split()
    scrub(pg, c["verified_at"] + 1)  # the forward that verified it: the draft struck, the verifier's token after it
    s = span(pg, c["i"])
    assert {"st-now", "v-rejected"} <= set(s["cls"].split())
    assert s["draft"] == shown(trace, c["draft"]) and s["text"] == shown(trace, c["token"])
    assert "line-through" in s["struck"] and s["before"] != "none"
    if box_class(pg, c["i"]) is not None:  # on the page: its box outlined and struck through
        assert {"st-now", "v-rejected"} <= set(box_class(pg, c["i"]).split())
        assert pg.locator(f"#player .mp-strikes [data-i='{c['i']}']").count() == 1
    caption = pg.inner_text("#player .mp-caption")
    assert f"Forward {c['verified_at'] + 1}" in caption and "rejected and replaced" in caption
    scrub(pg, c["verified_at"] + 2)  # a frame later it is plain committed text
    s = span(pg, c["i"])
    assert "st-done" in s["cls"].split() and "v-rejected" not in s["cls"] and s["draft"] is None
    assert pg.locator(f"#player .mp-strikes [data-i='{c['i']}']").count() == 0


def test_an_accepted_draft_is_marked_confirmed(opened, spec):
    trace, payload = spec
    pg = opened
    c = verdict_cases(trace, payload, ACCEPTED)[0]
    scrub(pg, c["drafted_at"] + 1)
    s = span(pg, c["i"])
    assert "st-draft" in s["cls"].split() and s["text"] == shown(trace, c["draft"])
    scrub(pg, c["verified_at"] + 1)
    s = span(pg, c["i"])
    assert {"st-now", "v-accepted"} <= set(s["cls"].split()) and s["text"] == shown(trace, c["draft"]) and s["draft"] is None


def test_the_card_lists_the_draft_history(opened, spec):
    trace, payload = spec
    pg = opened
    c = verdict_cases(trace, payload, REJECTED)[0]
    pg.click(f"#player .mp-text [data-i='{c['i']}']")
    rows = pg.eval_on_selector_all("#player .mp-inspect .mp-dh li", "ls => ls.map(l => [l.dataset.verdict, l.textContent])")
    drafted = [t for v, t in rows if v == "drafted" and f"forward {c['drafted_at'] + 1}" in t]
    assert drafted and trace.token_text(c["draft"]).strip() in drafted[0]
    rejected = [t for v, t in rows if v == "rejected"]
    assert len(rejected) == 1 and f"forward {c['verified_at'] + 1}" in rejected[0]
    assert trace.token_text(c["token"]).strip() in rejected[0] and "replaced by" in rejected[0]
    assert all(trace.model.name in t for _, t in rows)  # which model ran each forward (here the one model, in both roles)
    status = pg.inner_text("#player .mp-inspect .mp-d-status")
    assert "rejected draft" in status
    # the legend names the draft states
    legend = pg.eval_on_selector_all("#player .mp-legend-item", "xs => xs.map(x => x.dataset.legend)")
    assert {"st-draft", "st-now v-accepted", "st-now v-rejected", "st-discarded", "st-now v-bonus"} <= set(legend)


def test_phones_see_a_key_of_the_draft_states(browser, tmp_path, spec):
    """The full legend folds away on a phone; the key of the draft states stays under the caption."""
    from mudiff_viz.views.export import standalone_html_from_payload

    path = tmp_path / "phone.html"
    path.write_text(standalone_html_from_payload(spec[1], "self-speculative"), encoding="utf-8")
    o = Opened(browser, path, PHONE, touch=True)
    try:
        pg = o.pg
        assert not pg.is_visible("#player .mp-legend")
        key = pg.eval_on_selector("#player .mp-pane .mp-draft-key", """k => ({w: k.getBoundingClientRect().right,
            text: k.textContent, shown: k.getBoundingClientRect().height > 0})""")
        assert key["shown"] and key["w"] <= PHONE["width"]
        for word in ("draft", "accepted", "rejected", "discarded", "bonus"):
            assert word in key["text"]
    finally:
        o.close()


def test_a_comparison_marks_only_the_speculative_pane(opened, spec):
    """AR and self-speculative on one clock: the draft key and states belong to the speculative pane;
    the AR pane draws as it always has."""
    from mudiff_viz.decoding.pipeline import decode_page, make_params
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.views.player import compare_payload, player_payload

    ar = decode_page(load_page(str(SAMPLE)), "nano-subword", "ar", make_params(max_new_tokens=24))
    both = compare_payload([player_payload(ar), spec[1]])
    pg = opened
    pg.evaluate("p => document.getElementById('player').__mudiffPlayer.load(p)", both)
    c = verdict_cases(spec[0], spec[1], REJECTED)[0]
    scrub(pg, c["verified_at"] + 1)
    panes = pg.eval_on_selector_all("#player .mp-pane", """ps => ps.map(p => ({key: !!p.querySelector('.mp-draft-key'),
        marked: p.querySelectorAll('.mp-text .st-draft, .mp-text .v-accepted, .mp-text .v-rejected, .mp-text .v-bonus, .mp-text .st-discarded').length,
        header: p.querySelector('.mp-header').textContent}))""")
    assert [p["key"] for p in panes] == [False, True]
    assert panes[0]["marked"] == 0 and panes[1]["marked"] > 0
    assert "token step" in panes[0]["header"] and "drafts verified" in panes[1]["header"]
    legend = pg.eval_on_selector_all("#player .mp-legend-item", "xs => xs.map(x => x.dataset.legend)")
    assert "st-ghost" in legend and "st-draft" in legend  # both kinds of pane are on screen
