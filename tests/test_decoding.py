"""The block diffusion decoder against a straightforward reference of the official loop.

The reference below is written from docs/real-models.md#the-decoding-loop (the official
``low_confidence_dynamic`` loop of ``generate_with_embeds``), one row at a time, with its quirks:
no quota clamp, a sampled MASK leaves the position masked.
"""

from __future__ import annotations

import math

import pytest
import torch

from mudiff_viz.core.trace import Trace, check_invariants
from mudiff_viz.decoding.autoregressive import decode_autoregressive
from mudiff_viz.decoding.diffusion import decode_diffusion
from mudiff_viz.decoding.sampling import quota_schedule
from mudiff_viz.decoding.scheduler import BlockScheduler
from mudiff_viz.decoding.settings import DecodeParams
from mudiff_viz.decoding.strategies import strategy_names
from tests.fixed_backend import EOS, MASK, FixedBackend, FixedPage, V


def official_reference(backend: FixedBackend, row: int, block_length: int, steps: int, threshold: float,
                       temperature: float, seed: int, n_blocks: int, clamp: bool = False):
    """Tokens, per-position commit step and the number of re-commits, as the official loop does it.

    ``temperature == 0`` uses argmax with T = 1 confidences (the deterministic mode the design asks for).
    """
    gen = torch.Generator().manual_seed(seed)
    base, rem = divmod(block_length, steps)
    num_transfer = [base + (1 if i < rem else 0) for i in range(steps)]
    tokens: list[int] = []
    step_of: list[int] = []
    recommits = 0
    clock = 0
    for b in range(n_blocks):
        block = torch.full((1, block_length), MASK, dtype=torch.long)
        smap = torch.full((block_length,), -1, dtype=torch.long)
        i = 0
        while True:
            mask_index = block == MASK
            if mask_index.sum() == 0:
                break
            assert i < 10 * block_length + steps, "the official loop never finishes here"
            logits = backend.logits_for(row, b * block_length, block[0]).unsqueeze(0).float()
            if temperature == 0:
                probs = logits.softmax(-1)
                x0 = probs.argmax(-1)
            else:
                probs = (logits / temperature).softmax(-1)
                x0 = torch.multinomial(probs.reshape(-1, V), 1, generator=gen).reshape(1, block_length)
            x0_p = torch.gather(probs, -1, x0.unsqueeze(-1)).squeeze(-1)
            confidence = torch.where(mask_index, x0_p, torch.tensor(-math.inf))
            transfer = torch.zeros_like(x0, dtype=torch.bool)
            quota = num_transfer[i] if i < steps else 0
            if clamp:
                quota = min(quota, int(mask_index.sum()))
            high = confidence[0] > threshold
            if int(high.sum()) >= quota:
                transfer[0] = high
            else:
                _, idx = torch.topk(confidence[0], quota)
                transfer[0, idx] = True
            recommits += int((transfer & ~mask_index).sum())
            block[transfer] = x0[transfer]
            newly = transfer[0] & (x0[0] != MASK)
            smap[newly] = clock
            clock += 1
            i += 1
        tokens.extend(block[0].tolist())
        step_of.extend(smap.tolist())
        if EOS in block[0].tolist():
            break
    cut = tokens.index(EOS) + 1 if EOS in tokens else len(tokens)
    return tokens[:cut], step_of[:cut], recommits


def ours(backend: FixedBackend, **kw) -> Trace:
    params = DecodeParams(**kw)
    return decode_diffusion(backend, FixedPage(), backend.regions(None), params)


CONFIGS = [
    (bl, steps, thr, temp)
    for bl in (4, 8, 32)
    for steps in sorted({max(1, bl // 2), bl, bl * 2})
    for thr, temp in ((0.9, 0.0), (0.5, 0.0), (0.9, 1.0), (0.99, 1.0))
]


@pytest.mark.parametrize("block_length,steps,threshold,temperature", CONFIGS)
def test_matches_official_loop(block_length, steps, threshold, temperature):
    n_blocks = max(2, 64 // block_length)
    backend = FixedBackend(seed=block_length * 100 + steps, eos_at={0: 2 * block_length + 3}, bonus=0.6)
    trace = ours(backend, block_length=block_length, steps=steps, threshold=threshold, temperature=temperature,
                 seed=7, max_new_tokens=n_blocks * block_length)
    ref_tokens, ref_steps, recommits = official_reference(
        backend, 0, block_length, steps, threshold, temperature, 7, n_blocks)
    fixed_tokens, fixed_steps, _ = official_reference(
        backend, 0, block_length, steps, threshold, temperature, 7, n_blocks, clamp=True)
    got_tokens = [t.id for t in trace.regions[0].tokens]
    got_steps = [t.commit_forward for t in trace.regions[0].tokens]
    # ours == the official loop with the quota clamp, token for token and step for step ...
    assert got_tokens == fixed_tokens
    assert got_steps == fixed_steps
    # ... and == the unmodified official loop whenever its re-commit bug did not fire
    if recommits == 0:
        assert (got_tokens, got_steps) == (ref_tokens, ref_steps)
    assert check_invariants(trace) == []


def test_configs_exercise_the_recommit_bug():
    """Guard that the parametrised cases include ones where the official loop re-commits."""
    fired = 0
    for bl, steps, thr, temp in CONFIGS:
        backend = FixedBackend(seed=bl * 100 + steps, eos_at={0: 2 * bl + 3}, bonus=0.6)
        fired += official_reference(backend, 0, bl, steps, thr, temp, 7, max(2, 64 // bl))[2] > 0
    assert fired > 0


def test_quota_schedule():
    assert quota_schedule(32, 32) == [1] * 32
    assert quota_schedule(32, 5) == [7, 7, 6, 6, 6]
    assert quota_schedule(4, 8) == [1, 1, 1, 1, 0, 0, 0, 0]
    assert sum(quota_schedule(29, 6)) == 29


def test_official_recommit_bug_cannot_happen():
    """4 masked positions left, quota 8: the official topk would pick decoded positions too."""
    conf = torch.tensor([[0.99, 0.1, 0.2, 0.98, 0.3, 0.97, 0.4, 0.96]])
    masked = torch.tensor([[False, True, True, False, True, False, True, False]])
    # logits over (token 0, token 1, MASK=2) whose argmax has exactly these confidences
    logits = torch.stack([conf.log(), (1 - conf).clamp(min=1e-6).log(), torch.full_like(conf, -30.0)], -1)
    for strategy in strategy_names():
        params = DecodeParams(block_length=8, steps=1, threshold=0.95, strategy=strategy)
        out = BlockScheduler(params, mask_id=2, generator=torch.Generator().manual_seed(0)).step(logits, masked, 0)
        assert out.committed.tolist() == masked.tolist(), strategy  # exactly the masked ones, nothing re-committed
        assert torch.allclose(out.confidence[masked], torch.maximum(conf, 1 - conf)[masked], atol=1e-4)


def test_each_position_committed_once_even_when_official_would_recommit():
    # a case where an early step commits more than its quota, so a later quota exceeds the masks left
    backend = FixedBackend(seed=4, bonus=0.3)
    trace = ours(backend, block_length=32, steps=4, threshold=0.8, temperature=0.0, max_new_tokens=96)
    _, _, recommits = official_reference(backend, 0, 32, 4, 0.8, 0.0, 0, 3)
    assert recommits == 7
    assert check_invariants(trace) == []
    assert len(trace.regions[0].tokens) == 96


def test_deterministic_mode_is_reproducible_and_not_one_step():
    runs = [ours(FixedBackend(seed=11), block_length=32, steps=32, threshold=0.9, temperature=0.0,
                 max_new_tokens=64) for _ in range(2)]
    ids = [[(t.id, t.commit_forward, t.confidence) for t in r.tokens] for run in runs for r in run.regions]
    assert ids[0] == ids[1]
    assert [s.candidates for s in runs[0].steps] == [s.candidates for s in runs[1].steps]
    # a real deterministic mode keeps the T=1 confidences, so blocks take several steps
    assert len(runs[0].steps) > 2 * 2


def test_sampling_seed_controls_the_result():
    a = ours(FixedBackend(seed=5, scale=0.8, bonus=0.0), temperature=1.0, seed=1, max_new_tokens=64)
    b = ours(FixedBackend(seed=5, scale=0.8, bonus=0.0), temperature=1.0, seed=1, max_new_tokens=64)
    c = ours(FixedBackend(seed=5, scale=0.8, bonus=0.0), temperature=1.0, seed=2, max_new_tokens=64)
    assert a.text == b.text
    assert a.text != c.text


def test_sampled_mask_is_force_committed_at_the_step_limit():
    backend = FixedBackend(seed=2, mask_logit=None)
    backend.base[0, 5, MASK] = 50.0  # the model insists on MASK at position 5
    trace = ours(backend, block_length=8, steps=8, threshold=0.9, temperature=0.0, max_new_tokens=16)
    tokens = [t.id for t in trace.regions[0].tokens]
    assert MASK not in tokens and len(tokens) == 16
    forced = [s for s in trace.steps if s.forced]
    assert forced and 5 in forced[0].positions
    assert check_invariants(trace) == []


@pytest.mark.parametrize("strategy", ["low_confidence_static", "random", "left_to_right"])
def test_other_strategies_commit_exactly_the_quota(strategy):
    trace = ours(FixedBackend(seed=4, n_rows=2), block_length=8, steps=4, strategy=strategy,
                 temperature=0.0, max_new_tokens=32)
    assert check_invariants(trace) == []
    assert all(sum(s.committed) == 2 for s in trace.steps)
    if strategy == "left_to_right":
        for s in trace.steps:
            committed = [p for p, c in zip(s.positions, s.committed) if c]
            assert committed == s.positions[:2]


def test_frontier_fallback_commits_what_passes_else_the_leftmost():
    trace = ours(FixedBackend(seed=4, n_rows=2), block_length=8, steps=8, strategy="frontier_fallback",
                 threshold=0.9, temperature=0.0, max_new_tokens=32)
    assert check_invariants(trace) == []
    fallbacks = passing = 0
    for s in trace.steps:
        committed = [p for p, c in zip(s.positions, s.committed) if c]
        high = [p for p, c in zip(s.positions, s.confidences) if c > 0.9]
        if high:
            assert committed == high
            passing += 1
        else:
            assert committed == s.positions[:1]  # the quota of one, at the frontier
            fallbacks += 1
    assert fallbacks and passing


def test_stop_token_truncates_and_ends_the_row():
    backend = FixedBackend(seed=9, n_rows=3, eos_at={0: 10, 2: 40})
    trace = ours(backend, block_length=8, steps=8, threshold=0.9, max_new_tokens=64)
    lens = [len(r.tokens) for r in trace.regions]
    assert lens == [11, 64, 41]
    assert trace.regions[0].tokens[-1].stop and trace.regions[0].tokens[-1].id == EOS
    assert trace.regions[0].n_generated == 16  # the block holding the stop was decoded whole
    assert check_invariants(trace) == []
    # NFE: recorded forwards plus one block-commit pass per (row, block)
    assert trace.metrics["commit_passes"] == 2 + 8 + 6  # blocks decoded per row, the stop's block included
    assert trace.metrics["nfe"] == len(trace.steps) + trace.metrics["commit_passes"]
    assert backend.calls["commit"] == 8  # batched: one commit call per block


def test_ar_decoder_one_token_per_forward():
    backend = FixedBackend(seed=1, n_rows=2, eos_at={1: 6})
    trace = decode_autoregressive(backend, FixedPage(), backend.regions(None), DecodeParams(max_new_tokens=20))
    assert check_invariants(trace) == []
    assert all(sum(s.committed) == 1 and len(s.positions) == 1 for s in trace.steps)
    assert [len(r.tokens) for r in trace.regions] == [20, 7]
    assert trace.metrics["tokens_per_forward"] == 1.0
    # greedy: every token is the argmax of its logits
    assert [t.id for t in trace.regions[0].tokens] == backend.base[0, :20].argmax(-1).tolist()
    assert backend.calls["next"] == 19


def test_recording_switch():
    on = ours(FixedBackend(seed=6), max_new_tokens=64, record=True)
    off = ours(FixedBackend(seed=6), max_new_tokens=64, record=False)
    assert off.steps == [] and on.steps
    assert on.text == off.text
    assert on.metrics["nfe"] == off.metrics["nfe"]
    assert [t.commit_forward for t in on.regions[0].tokens] == [t.commit_forward for t in off.regions[0].tokens]


def test_trace_of_4000_tokens_stays_small(tmp_path):
    """Worst case for size: one token per step (block 32, 32 steps, threshold 1.0)."""
    backend = FixedBackend(seed=0, n_rows=40, max_len=128)
    trace = ours(backend, block_length=32, steps=32, threshold=1.0, max_new_tokens=100)
    assert trace.n_tokens >= 4000
    size = trace.save(tmp_path / "t.json")
    assert size < 8_000_000, size
    back = Trace.load(tmp_path / "t.json")
    assert back.to_dict() == trace.to_dict()


@pytest.mark.parametrize("decoder", ["diffusion", "ar"])
def test_snapshots_grow_towards_the_final_trace(decoder):
    """A streamed view asks for the trace so far after blocks: each snapshot holds a prefix of the
    final decode (the same tokens at the same forwards), and they grow."""
    from mudiff_viz.decoding.pipeline import decode_page

    backend = FixedBackend(seed=3, n_rows=3, eos_at={1: 40})
    if decoder == "ar":
        backend.kind = "ar"
    seen = []
    final = decode_page(FixedPage(), decoder=decoder, backend=backend,
                        params=DecodeParams(block_length=8, steps=8, max_new_tokens=96),
                        snapshot=lambda make: seen.append(make()))
    assert len(seen) >= 3
    sizes = [t.n_tokens for t in seen]
    assert sizes == sorted(sizes) and sizes[0] < final.n_tokens
    for snap in seen:
        for r_snap, r_final in zip(snap.regions, final.regions):
            got = [(t.id, t.commit_forward) for t in r_snap.tokens]
            assert got == [(t.id, t.commit_forward) for t in r_final.tokens][: len(got)]


def test_the_trace_flags_where_the_release_would_cut_at_a_later_endoftext():
    """The release searches <|endoftext|> before <|im_end|>: an <|endoftext|> after an earlier <|im_end|> in
    the last block moves its cut there; ours stays at the first stop token, and the trace names the region."""
    from mudiff_viz.decoding.sequential import merge_traces
    from tests.fixed_backend import EOS, FixedBackend, FixedPage

    IM_END = 7

    class TwoStops(FixedBackend):
        stop_ids = frozenset({EOS, IM_END})
        release_stop_order = (EOS, IM_END)

    backend = TwoStops(n_rows=3, eos_at={0: 5, 2: 3})
    backend.base[..., IM_END] -= 40.0  # the letter "h" stands for <|im_end|> here: only where placed
    for row, pos in ((0, 3), (1, 2)):  # row 0: im_end at 3, endoftext at 5; row 1: im_end only; row 2: endoftext only
        backend.base[row, pos, IM_END] = backend.base[row, pos].max() + 12.0
    backend.fav = backend.base.argmax(-1)
    params = DecodeParams(block_length=8, steps=8, threshold=0.9, max_new_tokens=16)
    trace = decode_diffusion(backend, FixedPage(), backend.regions(None), params)
    assert [len(r.tokens) for r in trace.regions] == [4, 3, 4] and all(r.tokens[-1].stop for r in trace.regions)
    assert trace.params["release_stop_cut"] == [0]
    merged = merge_traces([trace, trace], order=[3, 4, 5, 0, 1, 2])
    assert merged.params["release_stop_cut"] == [0, 3]
    plain = decode_diffusion(FixedBackend(n_rows=1, eos_at={0: 3}), FixedPage(), FixedBackend(n_rows=1).regions(None), params)
    assert "release_stop_cut" not in plain.params
