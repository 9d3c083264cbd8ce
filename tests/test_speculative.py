"""The draft-and-verify decoders are exact: self-speculative equals the model's block-length-1 decode,
speculative equals the verifier's greedy AR decode, token for token, on the embedded pairs (the
sample and held-out PyMuPDF renders, whole-page batches and one region at a time); and the trace
says what every forward drafted and what every verdict was."""

from __future__ import annotations

import collections
import json
import random

import pytest
import torch

from mudiff_viz.core.trace import ACCEPTED, BONUS, COMMITTING, DISCARDED, DRAFTED, REJECTED, Trace, check_invariants
from mudiff_viz.decoding.pipeline import decode_page, make_params
from mudiff_viz.decoding.speculative import decode_self_speculative, decode_speculative
from mudiff_viz.inputs import synth
from mudiff_viz.inputs.pages import load_page
from mudiff_viz.probes.replay import SAMPLES
from tests.markov_backend import MarkovBackend, MarkovPage

PAIRS = ["nano-char", "nano-subword"]


def ids(trace: Trace) -> list[list[int]]:
    return [[t.id for t in r.tokens] for r in trace.regions]


@pytest.fixture(scope="module")
def sample():
    torch.set_num_threads(1)
    return load_page(SAMPLES / "courier-short.pdf")


@pytest.fixture(scope="module")
def heldout():
    """A page of test-split text (never trained on), rendered by PyMuPDF at 150 dpi: an A6 page (about
    1,200 characters, 25 lines), so that four whole-page decodes per pair stay quick."""
    rng = random.Random(7)
    style = synth.PageStyle(font="times", size=11.0, columns=1, margin=30, heading=True, paper="a6")
    return synth.random_page(rng, "test", style=style).render(150)


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("batch", [True, False])
def test_self_speculative_is_the_block_length_1_decode(pair, batch, sample):
    ref = decode_page(sample, pair, "diffusion", make_params(block_length=1, steps=1), batch_regions=batch)
    spec = decode_page(sample, pair, "self-speculative", make_params(draft_length=4), batch_regions=batch)
    assert ids(spec) == ids(ref) and spec.text == ref.text
    assert check_invariants(spec) == []
    m = spec.metrics
    assert m.draft_forwards == m.verify_forwards == m.nfe  # every forward drafts and verifies
    assert m.tokens_per_forward > (3.0 if pair == "nano-char" else 1.8)  # vs 0.5 for the reference (2 forwards a token)
    assert m.nfe == len(spec.steps) and m.commit_passes == 0
    assert 0 < m.accepted <= m.drafted


@pytest.mark.parametrize("pair", PAIRS)
def test_speculative_is_the_ar_decode(pair, sample):
    ref = decode_page(sample, pair, "ar", make_params())
    spec = decode_page(sample, pair, "speculative", make_params(draft_length=4))
    assert ids(spec) == ids(ref) and spec.text == ref.text
    assert check_invariants(spec) == []
    m = spec.metrics
    assert spec.verifier is not None and spec.verifier.name.endswith("-ar") and spec.model.name.endswith("-diffusion")
    roles = collections.Counter(s.role for s in spec.steps)
    assert roles["verifier"] == m.verify_forwards and roles[None] == m.draft_forwards
    assert m.nfe == m.draft_forwards + m.verify_forwards  # both models' forwards on the one clock
    assert m.tokens_per_forward > 1.2


@pytest.mark.parametrize("pair", PAIRS)
def test_both_are_exact_on_a_held_out_render(pair, heldout):
    b1 = decode_page(heldout, pair, "diffusion", make_params(block_length=1, steps=1))
    ss = decode_page(heldout, pair, "self-speculative", make_params())
    ar = decode_page(heldout, pair, "ar", make_params())
    sp = decode_page(heldout, pair, "speculative", make_params())
    assert len(heldout.text) > 1000 and len(ss.regions) > 15
    assert ids(ss) == ids(b1) and ids(sp) == ids(ar)
    assert ss.metrics.cer < 0.06 and sp.metrics.cer < 0.04


def test_every_verdict_is_recorded(sample):
    """Each forward's record: verify entries (accepted, rejected, discarded, bonus) at the frontier
    and the drafts it proposed for the next forward, which that forward then verified."""
    spec = decode_page(sample, "nano-subword", "self-speculative", make_params(draft_length=4))
    seen = collections.Counter()
    proposed: dict[tuple[int, int], int] = {}  # (region, position) -> token drafted by the previous forward
    for s in sorted(spec.steps, key=lambda s: (s.region, s.forward)):
        assert s.verdicts is not None and len(s.verdicts) == len(s.positions) == len(s.drafts)
        verified = [(p, v, c, d) for p, v, c, d in zip(s.positions, s.verdicts, s.candidates, s.drafts) if v != DRAFTED]
        for p, v, c, d in verified:
            seen[v] += 1
            if d >= 0:
                assert proposed.pop((s.region, p)) == d  # the draft verified is the one proposed before
            if v == ACCEPTED:
                assert c == d
            elif v == REJECTED:
                assert c != d
            elif v == BONUS:
                assert d == -1
        # a rejected draft ends the verdict: what follows it is discarded
        codes = [v for _, v, _, _ in verified]
        assert all(v == DISCARDED for v in codes[codes.index(REJECTED) + 1 :]) if REJECTED in codes else True
        proposed = {k: v for k, v in proposed.items() if k[0] != s.region}
        for p, v, c in zip(s.positions, s.verdicts, s.candidates):
            if v == DRAFTED:
                proposed[(s.region, p)] = c
        assert [c for c, v in zip(s.committed, s.verdicts) if v in COMMITTING] == [1] * sum(v in COMMITTING for v in s.verdicts)
    assert all(seen[v] for v in (ACCEPTED, REJECTED, DISCARDED, BONUS))
    # the trace round-trips through JSON with its verdicts
    again = Trace.loads(spec.to_json())
    assert [s.verdicts for s in again.steps] == [s.verdicts for s in spec.steps]
    assert json.loads(spec.to_json())["metrics"]["verify_forwards"] == spec.metrics.verify_forwards


def test_the_lossy_rule_keeps_confident_drafts(sample):
    exact = decode_page(sample, "nano-subword", "self-speculative", make_params(draft_length=4))
    lossy = decode_page(sample, "nano-subword", "self-speculative",
                        make_params(draft_length=4, acceptance="confidence", accept_threshold=0.5))
    assert lossy.metrics.accepted / lossy.metrics.drafted > exact.metrics.accepted / exact.metrics.drafted
    assert lossy.metrics.tokens_per_forward > exact.metrics.tokens_per_forward
    kept_against = sum(1 for s in lossy.steps for v, c, tk in zip(s.verdicts, s.candidates, s.topk)
                       if v == ACCEPTED and tk and int(tk[0][0]) != c)
    assert kept_against > 0  # drafts kept where the verifier preferred another token


def test_a_model_that_cannot_draft_is_refused(sample):
    from mudiff_viz.core.errors import UserInputError

    with pytest.raises(UserInputError, match="block-diffusion"):
        decode_self_speculative(MarkovBackend("ar"), MarkovPage(), MarkovBackend("ar").regions(None), make_params())


@pytest.mark.parametrize("decoder", ["self-speculative", "speculative"])
def test_greedy_markov_decodes_are_exact(decoder):
    """A model whose one-token decode is known: the Markov chain's greedy path, whatever the drafts."""
    drafter = MarkovBackend("diffusion", n_rows=3, seed=3)
    params = make_params(max_new_tokens=12, draft_length=3)
    if decoder == "self-speculative":
        got = decode_self_speculative(drafter, MarkovPage(), drafter.regions(None), params)
    else:
        got = decode_speculative(drafter, MarkovPage(), drafter.regions(None), params, verifier=MarkovBackend("ar", 3, 3))
    prev, want = 0, []
    for _ in range(12):
        prev = int(drafter.table[prev].argmax())
        want.append(prev)
        if prev == 3:
            break
    assert ids(got) == [want] * 3
    assert check_invariants(got) == []
