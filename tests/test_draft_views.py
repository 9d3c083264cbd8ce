"""What the views make of a draft-and-verify trace: the player payload's draft columns and the
acceptance figure, on real decodes of the sample page by the shipped subword pair (16 tokens a line).
"""

from __future__ import annotations

import pytest

from mudiff_viz.core.speculation import acceptance_by_offset, tokens_per_cycle
from mudiff_viz.views import figures
from mudiff_viz.views.player import player_payload
from tests.ui_support import SAMPLE


@pytest.fixture(scope="module")
def traces():
    from mudiff_viz.decoding.pipeline import decode_page, make_params
    from mudiff_viz.inputs.pages import load_page

    page = load_page(str(SAMPLE))
    params = make_params(draft_length=4, max_new_tokens=16)
    return {d: decode_page(page, "nano-subword", d, params) for d in ("self-speculative", "speculative", "ar")}


def test_payload_entries_carry_each_records_verdicts(traces):
    for name in ("self-speculative", "speculative"):
        t = traces[name]
        e = player_payload(t)["entries"]
        assert len(e["verdict"]) == len(e["draft"]) == len(e["role"]) == len(e["slot"])
        by_forward = sorted(t.steps, key=lambda s: s.forward)
        assert e["verdict"] == [v for s in by_forward for v in s.verdicts]
        assert e["draft"] == [d for s in by_forward for d in s.drafts]
        assert sum(e["role"]) == sum(len(s.positions) for s in t.steps if s.role == "verifier")
        assert (sum(e["role"]) > 0) == (name == "speculative")  # the AR verifier ran forwards of its own


def test_payload_names_both_models(traces):
    p = player_payload(traces["speculative"])
    assert p["speculative"] == {"drafter": "nano-subword-diffusion", "verifier": "nano-subword-ar"}
    assert p["label"] == "speculative · nano-subword-diffusion drafts, nano-subword-ar verifies"
    s = player_payload(traces["self-speculative"])
    assert s["speculative"]["drafter"] == s["speculative"]["verifier"] == "nano-subword-diffusion"


def test_plain_traces_get_no_draft_columns(traces):
    p = player_payload(traces["ar"])
    assert p["speculative"] is None and "verdict" not in p["entries"] and "draft" not in p["entries"]
    assert figures.order_or_drafts(traces["ar"]).data[0].type == "heatmap"


def test_acceptance_figure_shows_the_trace_numbers(traces):
    t = traces["speculative"]
    fig = figures.order_or_drafts(t)
    rows = acceptance_by_offset(t)
    bars, cycles = fig.data
    assert list(bars.x) == [o for o, _, _ in rows]
    assert list(bars.y) == pytest.approx([a / v for _, v, a in rows])
    assert bars.y[0] >= bars.y[-1]  # drafts further from the frontier are accepted less often
    hist = tokens_per_cycle(t)
    assert dict(zip(cycles.x, cycles.y)) == dict(hist)
    assert f"{t.metrics.accepted}/{t.metrics.drafted} drafts accepted" in fig.layout.title.text
