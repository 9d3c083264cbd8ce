"""Compare's verdict (who won, on which clock, why, with the spread over rounds), its settings rows
and the one palette, on real decodes of the embedded nano pairs."""

from __future__ import annotations

import dataclasses
import re

import pytest

import mudiff_viz as mv
from mudiff_viz.core.trace import Trace
from mudiff_viz.ui.compare_tab import compare_plan, in_plan_order, interleaved, round_count
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.views import figures, tables
from mudiff_viz.views.assets import SRC_DIR
from mudiff_viz.views.labels import counted
from mudiff_viz.views.palette import DECODER_COLOURS, OKABE_ITO, decoder_colour
from mudiff_viz.views.verdict import Spread, matchups, spread, verdict_markdown
from tests.ui_support import SAMPLE

DECODERS = ("self-speculative", "speculative")


@pytest.fixture(scope="module")
def rounds() -> list[list[Trace]]:
    """Two interleaved rounds of AR, diffusion and both draft-and-verify decoders on the bundled sample."""
    cmp = mv.compare(SAMPLE, also=DECODERS, max_new_tokens=64, rounds=2)
    assert cmp.rounds[-1] == cmp.traces and cmp.verdict() == verdict_markdown(cmp.rounds)
    return cmp.rounds


def with_decode_s(trace: Trace, seconds: float) -> Trace:
    """The same decode with another decode time (as if the machine had been busier)."""
    m = dataclasses.replace(trace.metrics, decode_s=seconds, wall_s=trace.metrics.prefill_s + seconds)
    return dataclasses.replace(trace, metrics=m)


def test_spread_is_the_median_and_range():
    assert spread([3.0, 1.0, 2.0]) == Spread(2.0, 1.0, 3.0, 3)
    assert spread([5.0]).width == 0
    with pytest.raises(ValueError):
        spread([])


def test_rounds_interleave_so_no_decoder_always_runs_first():
    plan = compare_plan("nano", "nano", "speculative")
    schedule = interleaved(plan, 4)
    assert [[d for d, _, _ in r] for r in schedule] == [
        ["ar", "diffusion", "speculative"], ["diffusion", "speculative", "ar"],
        ["speculative", "ar", "diffusion"], ["ar", "diffusion", "speculative"]]
    assert round_count(None) == 2 and round_count("3") == 3
    for bad in (0, 6, "x"):
        with pytest.raises(UserInputError):
            round_count(bad)


def test_a_round_is_shown_in_plan_order(rounds):
    plan = compare_plan("nano", "nano", "self-speculative")
    shuffled = [rounds[0][2], rounds[0][0], rounds[0][1]]
    assert [t.decoder for t in in_plan_order(shuffled, plan)] == ["ar", "diffusion", "self-speculative"]


def test_the_verdict_counts_both_clocks_from_the_traces(rounds):
    ms = {m.decoder.decoder: m for m in matchups(rounds)}
    assert set(ms) == {"diffusion", *DECODERS}
    for decoder, m in ms.items():
        ar = [t for r in rounds for t in r if t.decoder == "ar"]
        me = [t for r in rounds for t in r if t.decoder == decoder]
        assert m.ar.forwards.median == ar[0].clock_length and m.decoder.forwards.median == me[0].clock_length
        assert m.decoder.decode_s.low == min(t.metrics.decode_s for t in me)
        assert m.decoder.decode_s.high == max(t.metrics.decode_s for t in me)
        # the two clocks and the cost of a forward agree round by round: speed-up = fewer forwards / cost
        for a, d in zip(ar, me):
            speedup = a.metrics.decode_s / d.metrics.decode_s
            cost = (d.metrics.decode_s / d.clock_length) / (a.metrics.decode_s / a.clock_length)
            assert speedup == pytest.approx(a.clock_length / d.clock_length / cost)
            assert m.wall_speedup.low <= speedup + 1e-12 and speedup <= m.wall_speedup.high + 1e-12
    # one token per forward: AR needs at least as many forwards as any block-wise decoder here
    assert ms["diffusion"].forward_ratio.median > 1


def test_the_verdict_line_names_winner_clocks_spread_and_why(rounds):
    text = verdict_markdown(rounds)
    diffusion_line = next(line for line in text.splitlines() if line.startswith("- **diffusion**"))
    ar_fwd = rounds[0][0].clock_length
    d_fwd = rounds[0][1].clock_length
    assert f"**diffusion** finished in {counted(d_fwd, 'forward')} and " in diffusion_line
    assert f"**AR** in {counted(ar_fwd, 'forward')} and " in diffusion_line
    assert "s of decode" in diffusion_line
    assert re.search(r"(faster on wall time\*\* \(|no winner on wall time)", diffusion_line)
    assert "over 2 rounds" in diffusion_line or "the same in all 2 rounds" in diffusion_line
    assert re.search(r"fewer forwards|more forwards", diffusion_line)
    assert re.search(r"one diffusion forward costs [\d.]+ AR forwards here", diffusion_line)
    assert "2 rounds, interleaved" in text
    for bad in ("None", "nan", "inf"):
        assert bad not in text


def test_rounds_that_disagree_give_no_wall_clock_winner(rounds):
    """Load that makes AR slower in one round and diffusion slower in the other is a spread, not a verdict."""
    (ar1, d1, *_), (ar2, d2, *_) = rounds
    drift = [[with_decode_s(ar1, 1.0), with_decode_s(d1, 2.0)], [with_decode_s(ar2, 2.0), with_decode_s(d2, 1.0)]]
    (m,) = matchups(drift)
    assert m.wall_winner is None
    assert "no winner on wall time" in verdict_markdown(drift)
    steady = [[with_decode_s(ar1, 2.0), with_decode_s(d1, 1.0)], [with_decode_s(ar2, 2.2), with_decode_s(d2, 1.0)]]
    assert matchups(steady)[0].wall_winner == "diffusion"
    assert "diffusion is **2.1x faster on wall time** (2.0–2.2x over 2 rounds)" in verdict_markdown(steady)
    one = verdict_markdown([drift[0]])
    assert "AR is **2.0x faster on wall time** (one round: no spread)" in one and "More rounds" in one


def test_settings_rows_show_only_what_each_decoder_ran(rounds):
    by = {t.decoder: t for t in rounds[0]}
    for t in by.values():
        assert not re.search(r"\bNone\b|\bnan\b", tables.settings_text(t)), tables.settings_text(t)
        assert not re.search(r"\bNone\b|\bnan\b", tables.model_text(t))
    assert "block 32, steps 32" in tables.settings_text(by["diffusion"])
    spec = tables.settings_text(by["speculative"])
    assert "block" not in spec and "threshold" not in spec
    assert f"drafts {by['speculative'].params['draft_length']} tokens" in spec
    assert tables.settings_text(by["ar"]) == "one token per forward, greedy"
    # the speculative row names the drafter and the verifier (the AR twin)
    model = tables.model_text(by["speculative"])
    assert model.startswith(by["speculative"].model.name) and "drafts" in model
    assert f"{by['ar'].model.name} " in model and model.endswith("verifies")
    assert "verifies itself" in tables.model_text(by["self-speculative"])


def test_every_decoder_has_its_own_okabe_ito_colour_everywhere(rounds):
    colours = [decoder_colour(d) for d in ("ar", "diffusion", *DECODERS)]
    assert len(set(colours)) == len(colours) and set(colours) <= set(OKABE_ITO.values())
    # the player's fallback colours are the palette's
    js = (SRC_DIR / "colours.js").read_text()
    line = next(line for line in js.splitlines() if "export const DECODER_COLOURS" in line)
    for decoder, colour in DECODER_COLOURS.items():
        assert re.search(rf'"?{re.escape(decoder)}"?: "{colour}"', line), decoder
    # every whole-run figure: one named, differently coloured series per decoder
    for fig in (figures.progress_curves(rounds[0], "forward"), figures.confidence_histogram(rounds[0])):
        named = {tr.name: (tr.line.color if tr.type == "scatter" else tr.marker.color) for tr in fig.data}
        assert set(named) == {"AR", "diffusion", *DECODERS}
        assert len(set(named.values())) == len(named)


def test_the_corpus_charts_tell_the_draft_and_verify_decoders_apart(rounds):
    """Corpus points of all four decoders (from these decodes): each decoder its own named colour."""
    from mudiff_viz.corpus import figures as corpus_figures

    points = [{"decoder": t.decoder, "tokens": t.n_tokens, "tokens_per_forward": t.metrics.tokens_per_forward,
               "source": "courier-short.pdf", "page_index": 0, "seed": 0, "cer": t.metrics.cer, "run_id": "r",
               "page_id": "p"} for t in rounds[0]]
    fig = corpus_figures.tokens_per_forward(points)
    colours = {tr.name: tr.marker.color for tr in fig.data}
    assert set(colours) == {"AR", "diffusion", *DECODERS} and len(set(colours.values())) == 4
