"""Accuracy and parallelism measures computed from texts and traces."""

from __future__ import annotations

import numpy as np
from rapidfuzz.distance import Levenshtein

from mudiff_viz.core.counts import trace_counts

CONFIDENT = 0.9  # a wrong token above this confidence is "confidently wrong"


def cer(hyp: str, ref: str) -> float:
    """Character error rate: edit distance over the reference length."""
    return Levenshtein.distance(hyp, ref) / max(1, len(ref))


def normalized_edit_distance(hyp: str, ref: str) -> float:
    """Edit distance over the longer string's length (OmniDocBench's text metric), in [0, 1]."""
    return Levenshtein.normalized_distance(hyp, ref)


def tokens_per_forward(trace) -> float:
    """Decoded tokens (including stop tokens) per sequence forward (denoising + block-commit)."""
    nfe = trace.metrics.nfe
    return trace.n_tokens / nfe if nfe else 0.0


def steps_per_block(trace) -> list[int]:
    """Denoising forwards each (region, block) took (core/counts.py: the player's count)."""
    return list(trace_counts(trace).steps_per_block.values())


def block_first_forwards(trace) -> dict[tuple[int, int], int]:
    """(region, block) -> the first forward that denoised it."""
    first: dict[tuple[int, int], int] = {}
    for s in trace.steps:
        key = (s.region, s.block)
        first[key] = min(first.get(key, s.forward), s.forward)
    return first


def first_step_share(trace) -> float | None:
    """Share of a block-wise trace's tokens (stop tokens included, block filler not) committed at
    the first denoising step of their block: 1.0 means every block is guessed in one go, no order
    to watch. None for AR traces and traces recorded without steps."""
    L = trace.block_length
    if L is None or not trace.steps:
        return None
    first = block_first_forwards(trace)
    hits = total = 0
    for ri, r in enumerate(trace.regions):
        for pos, t in enumerate(r.tokens):
            start = first.get((ri, pos // L))
            if start is not None:
                total += 1
                hits += t.commit_forward == start
    return hits / total if total else None


def mean_steps_per_block(trace) -> float | None:
    """Denoising forwards per (region, block), averaged; None without recorded steps or blocks (AR)."""
    if trace.block_length is None:
        return None
    counts = steps_per_block(trace)
    return sum(counts) / len(counts) if counts else None


def order_correlation(trace) -> float | None:
    """Mean Spearman correlation between position and commit step inside each block.

    1.0 means strictly left to right; 0 means no positional order. None when undefined.
    """
    if trace.block_length is None:
        return 1.0
    block_len = trace.block_length
    values = []
    for region in trace.regions:
        n = len(region.tokens)
        for start in range(0, n, block_len):
            steps = [t.commit_forward for t in region.tokens[start : start + block_len]]
            if len(steps) < 3 or len(set(steps)) < 2:
                continue
            pos_rank = np.arange(len(steps), dtype=float)
            step_rank = _rank(np.array(steps, dtype=float))
            values.append(float(np.corrcoef(pos_rank, step_rank)[0, 1]))
    return float(np.mean(values)) if values else None


def _rank(x: np.ndarray) -> np.ndarray:
    order = x.argsort(kind="stable")
    ranks = np.empty_like(x)
    ranks[order] = np.arange(len(x), dtype=float)
    # average ties
    for v in np.unique(x):
        idx = x == v
        ranks[idx] = ranks[idx].mean()
    return ranks
