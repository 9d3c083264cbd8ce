"""Decoding order, per trace and over many: which tokens wait, and what they wait for.

For every committed token of a block-wise trace: its position in its block, the denoising step of
its block at which it was committed (1 = the block's first forward), how many steps the block took,
its confidence, whether it belongs to an occluded word, and how far (in tokens) it is from the
nearest occluded token of its region. From those: commit step against position, confidence and
distance to an occlusion; the share of occluded tokens committed at their block's last step; and,
against the ground truth, how many occluded words came back and the CER on the rest.

Occluded words are located by the trace builder (``page.occluded[i].region/start/end``: a span of
the region's ground-truth characters); tokens map to ground-truth characters by the Levenshtein
alignment of the region's text with its ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mudiff_viz.core.align import char_map, opcodes
from mudiff_viz.core.limits import current
from mudiff_viz.core.trace import Trace

DISTANCE_BINS = ((0, 0, "occluded"), (1, 1, "1"), (2, 2, "2"), (3, 5, "3-5"), (6, 10**9, "6+"))


@dataclass
class TokenOrder:
    region: int
    index: int  # token index in the region
    pos_in_block: int
    step: int  # denoising step of its block at which it was committed (1-based)
    block_steps: int  # denoising steps its block took
    confidence: float
    occluded: bool
    distance: int | None  # tokens to the nearest occluded token of its region (0: occluded); None: none there


def occluded_spans(trace: Trace) -> dict[int, list[tuple[int, int]]]:
    """Region -> ground-truth character spans [start, end) of its occluded words."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for occ in trace.page.occluded:
        if occ.region is not None and occ.start is not None and occ.end is not None:
            spans.setdefault(occ.region, []).append((occ.start, occ.end))
    return spans


def occluded_tokens(region, spans: list[tuple[int, int]]) -> list[bool]:
    """Per token: does any of its characters align to an occluded ground-truth character?"""
    if not spans or region.gt_text is None or len(region.gt_text) > current().max_align_chars:
        return [False] * len(region.tokens)
    hidden = np.zeros(len(region.gt_text) + 1, dtype=bool)
    for a, b in spans:
        hidden[a:b] = True
    hyp = "".join(t.text for t in region.tokens)
    mapping = char_map(hyp, region.gt_text)
    out, pos = [], 0
    for t in region.tokens:
        idx = [mapping[k] for k in range(pos, pos + len(t.text)) if mapping[k] is not None]
        out.append(any(hidden[i] for i in idx))
        pos += len(t.text)
    return out


def token_orders(trace: Trace) -> list[TokenOrder]:
    """One record per committed token of a block-wise trace with recorded steps (else empty)."""
    L = trace.block_length
    if L is None or not trace.steps:
        return []
    first: dict[tuple[int, int], int] = {}
    last: dict[tuple[int, int], int] = {}
    for s in trace.steps:
        key = (s.region, s.block)
        first[key] = min(first.get(key, s.forward), s.forward)
        last[key] = max(last.get(key, s.forward), s.forward)
    spans = occluded_spans(trace)
    out = []
    for ri, r in enumerate(trace.regions):
        hidden = occluded_tokens(r, spans.get(ri, []))
        marks = [i for i, h in enumerate(hidden) if h]
        for i, t in enumerate(r.tokens):
            key = (ri, i // L)
            if key not in first:
                continue
            distance = min((abs(i - m) for m in marks), default=None)
            out.append(TokenOrder(ri, i, i % L, t.commit_forward - first[key] + 1, last[key] - first[key] + 1,
                                  t.confidence, hidden[i], distance))
    return out


def _spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    ra, rb = _rank(np.asarray(a, float)), _rank(np.asarray(b, float))
    return float(np.corrcoef(ra, rb)[0, 1])


def _rank(x: np.ndarray) -> np.ndarray:
    order = x.argsort(kind="stable")
    ranks = np.empty_like(x)
    ranks[order] = np.arange(len(x), dtype=float)
    for v in np.unique(x):  # ties share their mean rank
        ranks[x == v] = ranks[x == v].mean()
    return ranks


def _mean(values) -> float | None:
    values = list(values)
    return float(np.mean(values)) if values else None


def recovery(trace: Trace) -> dict:
    """Occluded words recovered (every character aligned equal) and CER on the rest of the text."""
    spans = occluded_spans(trace)
    words = recovered = 0
    rest_edits = rest_chars = 0
    for ri, r in enumerate(trace.regions):
        ops = None if r.gt_text is None else opcodes(r.text, r.gt_text)
        if ops is None:  # no ground truth, or too long to align
            continue
        hidden = np.zeros(len(r.gt_text) + 1, dtype=bool)
        for a, b in spans.get(ri, []):
            hidden[a:b] = True
        equal = np.zeros(len(r.gt_text), dtype=bool)
        for op in ops:
            if op.tag == "equal":
                equal[op.dest_start : op.dest_end] = True
            else:
                cost = max(op.src_end - op.src_start, op.dest_end - op.dest_start)
                touches = hidden[op.dest_start : max(op.dest_end, op.dest_start + 1)].any()
                rest_edits += 0 if touches else cost
        for a, b in spans.get(ri, []):
            words += 1
            recovered += bool(equal[a:b].all())
        rest_chars += int((~hidden[: len(r.gt_text)]).sum())
    return {
        "occluded_words": words,
        "recovered_words": recovered,
        "recovery_rate": recovered / words if words else None,
        "cer_rest": rest_edits / rest_chars if rest_chars else None,
    }


def order_summary(traces: list[Trace]) -> dict:
    """Order statistics pooled over ``traces`` (one trace, or a whole benchmark)."""
    rows = [o for t in traces for o in token_orders(t)]
    L = max((t.block_length or 0 for t in traces), default=0)
    by_pos = [_mean(o.step for o in rows if o.pos_in_block == p) for p in range(L)]
    by_distance = {}
    for lo, hi, label in DISTANCE_BINS:
        sel = [o.step for o in rows if o.distance is not None and lo <= o.distance <= hi]
        by_distance[label] = {"mean_step": _mean(sel), "tokens": len(sel)}
    occluded = [o for o in rows if o.occluded]
    others = [o for o in rows if not o.occluded]
    rec = [recovery(t) for t in traces]
    words = sum(r["occluded_words"] for r in rec)
    return {
        "tokens": len(rows),
        "mean_step_by_position": by_pos,
        "step_vs_position": _spearman([o.pos_in_block for o in rows], [o.step for o in rows]),
        "step_vs_confidence": _spearman([o.confidence for o in rows], [o.step for o in rows]),
        "step_by_distance_to_occlusion": by_distance,
        "first_step_share": _mean(o.step == 1 for o in rows),
        "occluded_tokens": len(occluded),
        "occluded_last_step_share": _mean(o.step == o.block_steps for o in occluded),
        "other_last_step_share": _mean(o.step == o.block_steps for o in others),
        "occluded_words": words,
        "recovered_words": sum(r["recovered_words"] for r in rec),
        "recovery_rate": sum(r["recovered_words"] for r in rec) / words if words else None,
        "cer_rest": _mean(r["cer_rest"] for r in rec if r["cer_rest"] is not None),
    }
