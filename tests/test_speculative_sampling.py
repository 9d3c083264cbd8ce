"""With temperature > 0 the draft-and-verify decoders sample from the verifier's own distribution:
the speculative-sampling rule (decoding/acceptance.py), checked by chi-square tests with fixed seeds
on a small vocabulary, one verdict at a time and for whole decoded sequences. A broken rule (keep
every draft) fails the same test, so the test can tell."""

from __future__ import annotations

import collections

import pytest
import torch

from mudiff_viz.decoding.acceptance import Acceptance
from mudiff_viz.decoding.pipeline import make_params
from mudiff_viz.decoding.speculative import decode_self_speculative, decode_speculative
from tests.markov_backend import MarkovBackend, MarkovPage, sequence_probs


def chi_square_p(observed: dict, expected: dict[tuple, float], n: int) -> float:
    """p-value of the observed counts under the expected probabilities (cells under 5 expected pooled)."""
    cells, pooled_o, pooled_e = [], 0, 0.0
    for key, prob in expected.items():
        e = prob * n
        if e < 5:
            pooled_o, pooled_e = pooled_o + observed.get(key, 0), pooled_e + e
        else:
            cells.append((observed.get(key, 0), e))
    if pooled_e:
        cells.append((pooled_o, pooled_e))
    assert sum(o for o, _ in cells) == n  # nothing outside the support
    stat = sum((o - e) ** 2 / e for o, e in cells)
    dof = len(cells) - 1
    return float(torch.special.gammaincc(torch.tensor(dof / 2.0, dtype=torch.float64), torch.tensor(stat / 2.0, dtype=torch.float64)))


def one_verdict(rule: str, n: int = 40_000, seed: int = 0):
    """Drafts drawn from q, verified against p: the distribution of the committed first token."""
    g = torch.Generator().manual_seed(seed)
    v = 5
    p_logits = torch.tensor([1.0, 0.2, -0.5, 0.7, -2.0]).expand(n, 2, v)
    q = torch.tensor([0.05, 0.5, 0.3, 0.1, 0.05]).expand(n, 1, v).contiguous()
    drafts = torch.multinomial(q[:, 0], 1, generator=g)
    accept = Acceptance(make_params(temperature=1.0, acceptance=rule, accept_threshold=0.0), g, None)
    verdict = accept(drafts, q[:, 0].gather(1, drafts), q, p_logits)
    first = torch.where(verdict.n_accepted > 0, drafts[:, 0], verdict.token)
    p = p_logits[0, 0].softmax(-1)
    return collections.Counter((t,) for t in first.tolist()), {(t,): float(p[t]) for t in range(v)}


def test_one_verdict_keeps_the_verifiers_distribution():
    observed, expected = one_verdict("exact")
    assert chi_square_p(observed, expected, 40_000) > 1e-3


def test_the_test_rejects_a_rule_that_keeps_every_draft():
    observed, expected = one_verdict("confidence")  # lossy, threshold 0: every draft kept
    assert chi_square_p(observed, expected, 40_000) < 1e-9


@pytest.mark.parametrize("decoder, branches", [("self-speculative", "masks"), ("self-speculative", "runner-up"),
                                               ("self-speculative", "last"), ("speculative", "masks")])
def test_sampled_sequences_follow_the_verifier(decoder, branches):
    """3,000 independent rows of a Markov chain decoded three tokens deep: the sequences' frequencies
    match the chain's exact sequence probabilities (drafts come from another table; with runner-up
    branches, the next drafts of a row whose correction was its runner-up come from that branch)."""
    n, length = 3000, 3
    drafter = MarkovBackend("diffusion", n_rows=n, seed=5)
    params = make_params(temperature=1.0, seed=11, max_new_tokens=length, draft_length=2, draft_branches=branches)
    if decoder == "self-speculative":
        trace = decode_self_speculative(drafter, MarkovPage(), drafter.regions(None), params)
    else:
        trace = decode_speculative(drafter, MarkovPage(), drafter.regions(None), params,
                                   verifier=MarkovBackend("ar", n_rows=n, seed=5))
    observed = collections.Counter(tuple(t.id for t in r.tokens) for r in trace.regions)
    expected = sequence_probs(drafter.table, length)
    assert chi_square_p(observed, expected, n) > 1e-3
    assert trace.metrics.accepted < trace.metrics.drafted  # the drafts were really tested
    if branches == "runner-up":
        assert trace.metrics.anchor_hits > 0  # the anchored branches were really used
    if branches == "last":  # rows whose drafts were not all kept verified nothing in their next forward
        assert trace.metrics.drafted < trace.metrics.verify_forwards * 2
