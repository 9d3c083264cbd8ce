"""core/counts.py under hypothesis (issue 48): random decodes by the real decoders (block diffusion
with fillers after an early stop token and token limits mid-block, AR, self-speculative and
speculative, per-region decodes merged back to back) of the test backends (tests/fixed_backend.py:
hand-built logits; tests/markov_backend.py: a Markov chain behind the draft-and-verify protocol).
Every trace passes the trace validator, and its counts keep the identities that make every view of
one frame agree."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mudiff_viz.core.counts import GLOSSARY, metric_problems, trace_counts
from mudiff_viz.core.trace import Trace, check_invariants
from mudiff_viz.decoding.autoregressive import decode_autoregressive
from mudiff_viz.decoding.diffusion import decode_diffusion
from mudiff_viz.decoding.pipeline import make_params
from mudiff_viz.decoding.sequential import decode_sequential
from mudiff_viz.decoding.speculative import decode_self_speculative, decode_speculative
from mudiff_viz.views.player import player_payload
from mudiff_viz.views.tables import summary_markdown
from tests.fixed_backend import FixedBackend, FixedPage
from tests.markov_backend import MarkovBackend, MarkovPage

DECODERS = ("diffusion", "ar", "self-speculative", "speculative", "merged diffusion")


@st.composite
def decodes(draw) -> Trace:
    """One real decode with random settings (every knob within its range)."""
    decoder = draw(st.sampled_from(DECODERS))
    rows = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 50))
    max_new = draw(st.integers(2, 24))
    temperature = draw(st.sampled_from([0.0, 1.0]))
    if decoder in ("self-speculative", "speculative"):
        backend = MarkovBackend("diffusion", n_rows=rows, seed=seed)
        params = make_params(max_new_tokens=max_new, temperature=temperature, seed=seed,
                             draft_length=draw(st.integers(1, 6)), draft_branches=draw(st.sampled_from(["masks", "last"])))
        if decoder == "self-speculative":
            return decode_self_speculative(backend, MarkovPage(), backend.regions(None), params)
        return decode_speculative(backend, MarkovPage(), backend.regions(None), params,
                                  verifier=MarkovBackend("ar", n_rows=rows, seed=seed))
    eos_at = draw(st.dictionaries(st.integers(0, rows - 1), st.integers(0, max_new - 1), min_size=1, max_size=rows))  # early stops
    backend = FixedBackend(n_rows=rows, seed=seed, eos_at=eos_at)
    if decoder == "ar":
        return decode_autoregressive(backend, FixedPage(), backend.regions(None),
                                     make_params(max_new_tokens=max_new, temperature=temperature, seed=seed))
    block = draw(st.sampled_from([1, 4, 8, 8]))
    steps = draw(st.integers(1, block))
    threshold = draw(st.sampled_from([0.5, 0.9, 1.0]))
    strategy = draw(st.sampled_from(["low_confidence_dynamic", "low_confidence_static", "left_to_right", "random"]))
    params = make_params(block_length=block, steps=steps, threshold=threshold, strategy=strategy,
                         max_new_tokens=max_new, temperature=temperature, seed=seed)
    if decoder == "merged diffusion":
        return decode_sequential(backend, FixedPage(), backend.regions(None), decode_diffusion, params)
    return decode_diffusion(backend, FixedPage(), backend.regions(None), params)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decodes())
def test_count_identities_hold_for_every_decoder(trace):
    # a real decode passes the validator, and its metrics are the counts' derivation
    assert Trace.loads(trace.to_json()).metrics == trace.metrics
    assert check_invariants(trace) == [] and metric_problems(trace) == []
    c = trace_counts(trace)
    f = c.per_forward
    n = trace.clock_length
    assert c.forwards == n and all(len(v) == n for v in vars(f).values())
    # committed = tokens of the text + fillers after its end, per forward and in all
    assert all(f.committed[k] == f.tokens[k] + f.fillers[k] for k in range(n))
    assert sum(f.committed) == c.tokens + c.fillers
    assert sum(f.tokens) == c.tokens == trace.n_tokens == trace.metrics.tokens
    assert c.fillers == sum(sum(1 for p, x in zip(s.positions, s.committed) if x and p >= len(trace.regions[s.region].tokens))
                            for s in trace.steps)
    # NFE = forwards summed over the regions (+ the passes that store finished blocks)
    assert c.nfe == sum(c.forwards_per_region) + c.commit_passes == trace.metrics.nfe
    assert sum(c.steps_per_block.values()) == len(trace.steps) == sum(f.regions)
    assert abs(c.tokens_per_forward - trace.metrics.tokens_per_forward) <= 1e-3 * max(1.0, c.tokens_per_forward)
    assert trace.metrics.batched_forwards >= n
    if trace.is_speculative:
        for k in range(n):
            assert f.verified[k] == f.accepted[k] + f.rejected[k] + f.discarded[k]
            # a position is committed by accepting its draft, by the verifier's correction or as a bonus
            assert f.committed[k] == f.accepted[k] + f.rejected[k] + f.bonus[k]
        assert c.drafts_accepted <= trace.metrics.accepted <= trace.metrics.drafted
    elif trace.is_autoregressive:
        assert f.committed == f.regions and set(f.masks_left) <= {0}
    else:
        # masks left after a step = masks left before - committed + newly opened
        before = 0
        for k in range(n):
            assert f.masks_left[k] == before - f.committed[k] + f.opened[k] >= 0
            before = f.masks_left[k]
        assert f.masks_left[-1] == 0  # every block closes (a stop token, the token limit or its last step)
        # ... and per block: each step starts from what the previous step of its block left
        left: dict[tuple[int, int], int] = {}
        for s in sorted(trace.steps, key=lambda s: s.forward):
            key = (s.region, s.block)
            if key in left:
                assert len(s.positions) == left[key]
            left[key] = len(s.positions) - sum(s.committed)
        for k in range(n):
            assert 1 <= f.step[k] <= f.steps[k] <= trace.params["steps"] + 1
    # the player's payload carries exactly these counts
    ser = player_payload(trace)["series"]
    assert (ser["masks_left"], ser["committed"], ser["kept"], ser["fillers"], ser["regions"]) == (
        f.masks_left, f.committed, f.tokens, f.fillers, f.regions)
    line = summary_markdown(trace)
    assert f"NFE {c.nfe}" in line and f"{c.tokens} token" in line


def test_every_count_has_a_glossary_line():
    assert {"masks left", "committed this step", "NFE", "fillers", "regions decoding", "drafts verified"} <= set(GLOSSARY)
