"""The fused denoising step (no host round trip per step) against the eager loop: the same tokens,
the same step maps, the same traces (times aside), on the test backend, on the embedded pair
(regions batched, rows finishing their blocks at different steps) and on a real-layout checkpoint
(tests/test_real_models.py::test_fused_loop_equals_eager_on_the_tiny_checkpoint)."""

from __future__ import annotations

import copy

import pytest
import torch

from mudiff_viz.core.trace import Trace, check_invariants
from mudiff_viz.decoding.diffusion import decode_diffusion
from mudiff_viz.decoding.pipeline import decode_page
from mudiff_viz.decoding.settings import DecodeParams
from tests.fixed_backend import FixedBackend, FixedPage

TIME_KEYS = {"time_s", "commit_time_s", "wall_s", "prefill_s", "decode_s", "time_to_first_token_s", "recording_s"}


def timeless(trace: Trace) -> dict:
    """The trace as a dict without wall-clock times and without the name of the loop that ran."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in TIME_KEYS}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    d = strip(copy.deepcopy(trace.to_dict()))
    d["params"].pop("loop", None)
    return d


def both(decode, **knobs) -> tuple[Trace, Trace]:
    eager = decode(DecodeParams(**knobs, fused=False))
    fused = decode(DecodeParams(**knobs, fused=True))
    assert eager.params["loop"] == "eager" and fused.params["loop"] == "fused"
    return eager, fused


CONFIGS = [
    dict(block_length=8, steps=8, threshold=0.9),
    dict(block_length=8, steps=3, threshold=0.8),
    dict(block_length=4, steps=8, threshold=0.95),
    dict(block_length=16, steps=16, threshold=0.5, strategy="low_confidence_static"),
    dict(block_length=8, steps=8, threshold=0.9, strategy="left_to_right"),
    dict(block_length=8, steps=8, threshold=0.9, temperature=1.0, seed=3),
    dict(block_length=8, steps=4, threshold=0.9, strategy="random", temperature=0.7, seed=5),
]


@pytest.mark.parametrize("knobs", CONFIGS)
def test_fused_equals_eager_on_the_test_backend(knobs):
    def decode(params):
        backend = FixedBackend(seed=7, n_rows=4, eos_at={0: 11, 2: 27}, bonus=0.5)
        return decode_diffusion(backend, FixedPage(), backend.regions(None), params)

    eager, fused = both(decode, max_new_tokens=48, **knobs)
    assert timeless(fused) == timeless(eager)
    assert check_invariants(fused) == []
    assert len(fused.steps) > len({s.forward for s in fused.steps})  # rows were batched in one forward


@pytest.mark.parametrize("pair", ["nano-char", "nano-subword"])
def test_fused_equals_eager_on_the_embedded_pair(pair):
    """Batched regions finish their blocks at different steps: the fused loop forwards them all. (The
    subword twin's release-sampler CER on this 96-token cut: v5 34.0%, v7 39.3%; a guard, not a target.)"""
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.probes.replay import SAMPLES

    torch.set_num_threads(1)
    page = load_page(SAMPLES / "courier-short.pdf")
    eager, fused = both(lambda p: decode_page(page, model=pair, decoder="diffusion", params=p),
                        block_length=16, steps=16, threshold=0.95, max_new_tokens=96)
    assert timeless(fused) == timeless(eager) and fused.metrics["cer"] < (0.05 if pair == "nano-char" else 0.45)
    finishing = {}
    for s in eager.steps:
        finishing.setdefault((s.block, s.forward), set()).add(s.region)
    assert any(len(v) < len(eager.regions) for v in finishing.values())  # some rows sat out some steps


@pytest.mark.parametrize("knobs", [dict(block_length=8, steps=4, threshold=0.9),
                                   dict(block_length=8, steps=8, threshold=0.6, temperature=1.0, seed=2)])
def test_a_mask_predicting_head_forces_commits_on_one_clock(knobs):
    """MASK is the likeliest token at many positions, so blocks reach the step limit and force-commit.
    The eager loop once left the force step off the clock (the next block's first step reused its
    forward number: clock length 49 against the fused loop's 50); one loop now serves both."""
    def decode(params):
        backend = FixedBackend(seed=3, n_rows=3, eos_at={1: 20}, mask_logit=4.0, bonus=0.3)
        return decode_diffusion(backend, FixedPage(), backend.regions(None), params)

    eager, fused = both(decode, max_new_tokens=40, **knobs)
    assert sum(s.forced for s in eager.steps) > 0  # the step limit was reached
    assert eager.clock_length == fused.clock_length == 1 + max(s.forward for s in eager.steps)
    assert timeless(fused) == timeless(eager)
    assert check_invariants(eager) == [] and check_invariants(fused) == []
    forwards = {(s.region, s.forward): s.block for s in eager.steps}
    assert len(forwards) == len(eager.steps)  # no region has two steps on one clock index


def test_invariants_refuse_one_forward_in_two_blocks():
    backend = FixedBackend(seed=3, n_rows=1, mask_logit=4.0, bonus=0.3)
    trace = decode_diffusion(backend, FixedPage(), backend.regions(None),
                             DecodeParams(block_length=4, steps=2, max_new_tokens=12))
    assert check_invariants(trace) == []
    first_of_block_1 = next(s for s in trace.steps if s.block == 1)
    last_of_block_0 = [s for s in trace.steps if s.block == 0][-1]
    first_of_block_1.forward = last_of_block_0.forward  # what the eager loop's clock bug produced
    assert any("in blocks 0 and 1" in p for p in check_invariants(trace))


def mask_heavy(lm_head: torch.nn.Linear, mask_id: int) -> None:
    """Make MASK the likeliest token at about half the positions: its output row becomes the sum
    of all rows, so its logit is the sum of every token's (large, of either sign)."""
    with torch.no_grad():
        lm_head.weight[mask_id] = lm_head.weight.sum(0)


def test_a_mask_predicting_head_on_the_embedded_pair_gives_one_trace():
    """The character pair's real weights with a MASK-predicting output row: blocks end at the step
    limit, and both loops record the same steps on the same clock."""
    from models.nano_char.backend import NanoCharBackend
    from models.registry import NANO_DIR
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.probes.replay import SAMPLES

    torch.set_num_threads(1)
    backend = NanoCharBackend(NANO_DIR / "nano-char-diffusion")
    mask_heavy(backend.model.lm_head, backend.mask_id)
    page = load_page(SAMPLES / "courier-short.pdf")
    eager, fused = both(lambda p: decode_page(page, decoder="diffusion", backend=backend, params=p),
                        block_length=16, steps=4, threshold=0.9, max_new_tokens=48)
    assert sum(s.forced for s in eager.steps) > 0
    assert eager.clock_length == fused.clock_length
    assert timeless(fused) == timeless(eager) and check_invariants(eager) == []
