"""Decode regions one at a time and merge the per-region traces into one Trace.

The real models decode a batch of one by default (a page or one layout block). Each region then has its own
clock, times and region index 0; merging puts them on one shared clock, back to back: forward
indices (``forward``) and times are offset by everything decoded before, region indices by the
regions before, and the metrics are summed. The result passes ``trace.check_invariants``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from mudiff_viz.core.trace import RegionRecord, StepRecord, Trace, rnd
from mudiff_viz.decoding.build import SPECULATION, joined_text, run_metrics
from mudiff_viz.decoding.observers import ProgressFn, Snapshot

Decode = Callable  # a registered decoder's run: (backend, page, regions, params, progress, snapshot=) -> Trace
SUMMED = ("nfe", "commit_passes", "batched_forwards", "wall_s", "prefill_s")


def decode_sequential(
    backend,
    page,
    regions: Sequence,
    decode: Decode,
    params,
    progress: ProgressFn | None = None,
    before: Sequence[Trace] = (),
    extra_params: dict | None = None,
    snapshot: Snapshot | None = None,
    params_for: Callable | None = None,
) -> Trace:
    """Decode ``regions`` one by one (skipping those marked ``meta['skip']``) after the ``before`` traces.
    ``params_for(region)``: the params of one region's decode (the two-stage parse's per-task token limits).

    The decode time limit (``params.max_seconds``) covers the whole sequence: later regions get
    what is left, and regions reached after it ran out are kept undecoded.
    """
    start = time.perf_counter() - sum(t.metrics.get("wall_s", 0.0) for t in before)
    parts: list[Trace | RegionRecord] = list(before)
    truncated = None
    for i, region in enumerate(regions):
        if region.meta.get("skip"):
            parts.append(placeholder(region))
            continue
        left = None
        if params.max_seconds is not None:
            left = params.max_seconds - (time.perf_counter() - start)
            if left <= 0:
                truncated = f"time limit of {params.max_seconds:.0f} s"
                parts.append(placeholder(region))
                continue
        rest = [placeholder(r) for r in regions[i + 1 :]]
        inner = None
        if snapshot:  # the regions so far, this one as it goes, and the rest still to come
            def inner(make, done=list(parts), rest=rest):
                snapshot(lambda: merge_traces(done + [make()] + rest, extra_params=extra_params))
        own = params_for(region) if params_for else params
        parts.append(decode(backend, page, [region], replace(own, max_seconds=left), None, snapshot=inner))
        if progress:
            progress(i + 1, len(regions))
    if not any(isinstance(p, Trace) for p in parts):
        raise ValueError("nothing was decoded")
    return merge_traces(parts, extra_params=extra_params, truncated=truncated)


def placeholder(region) -> RegionRecord:
    """An undecoded region (a picture, or past the time limit): its box and kind, no tokens."""
    return RegionRecord(bbox=[round(v, 1) for v in region.bbox], text="", tokens=[], kind=region.kind)


def merge_traces(
    parts: Sequence[Trace | RegionRecord], extra_params: dict | None = None, truncated: str | None = None,
    order: Sequence[int] | None = None,
) -> Trace:
    """One Trace from per-region traces (and undecoded regions), decoded back to back. ``order``:
    the merged regions' final order, as indices into them in part order (a part that decoded several
    regions as one batch holds them together; ``order`` puts each back where it sits on the page)."""
    traces = [p for p in parts if isinstance(p, Trace)]
    first = traces[0]
    regions: list[RegionRecord] = []
    steps: list[StepRecord] = []
    vocab: dict[str, str] = {}
    sums = dict.fromkeys(SUMMED, 0.0)
    speculation: dict[str, int] = {}
    clock_off, time_off = 0, 0.0
    occluded = list(first.page.occluded)  # each part located the words of its own region (index 0)
    reasons = [truncated] if truncated else []
    moved: list[int] = []  # regions whose release stop cut lies elsewhere (decoding/build.py)
    for part in parts:
        if isinstance(part, RegionRecord):
            regions.append(part)
            continue
        region_off = len(regions)
        moved += [ri + region_off for ri in part.params.get("release_stop_cut", ())]
        for k, occ in enumerate(part.page.occluded[: len(occluded)]):
            if occ.region is not None:
                occluded[k] = replace(occ, region=occ.region + region_off)
        for s in part.steps:
            steps.append(replace(s, forward=s.forward + clock_off, region=s.region + region_off, time_s=rnd(s.time_s + time_off)))
        for r in part.regions:
            tokens = [
                replace(t, commit_forward=t.commit_forward + clock_off, commit_time_s=rnd(t.commit_time_s + time_off))
                for t in r.tokens
            ]
            regions.append(replace(r, tokens=tokens))
        vocab.update(part.vocab)
        for key in SUMMED:
            sums[key] += part.metrics.get(key, 0)
        if part.is_speculative:
            for key in SPECULATION:
                speculation[key] = speculation.get(key, 0) + part.metrics[key]
        if part.metrics.get("truncated"):
            reasons.append(part.metrics["truncated"])
        clock_off += part.clock_length
        time_off += part.metrics.get("wall_s", 0.0)
    if order is not None:
        new_of = {old: new for new, old in enumerate(order)}
        regions = [regions[i] for i in order]
        steps = [replace(s, region=new_of[s.region]) for s in steps]
        occluded = [o if o.region is None else replace(o, region=new_of[o.region]) for o in occluded]
        moved = sorted(new_of[ri] for ri in moved)
    text, gt_text = joined_text(regions)
    metrics = run_metrics(
        regions, int(sums["nfe"] - sums["commit_passes"]), int(sums["commit_passes"]), int(sums["batched_forwards"]),
        sums["wall_s"], sums["prefill_s"], text, gt_text, "; ".join(dict.fromkeys(reasons)) or None,
        regions_decoded=len(traces), speculation=speculation or None,
        recording_s=sum(t.metrics.recording_s for t in traces) if all("recording_s" in t.metrics for t in traces) else None,
    )
    params = {**first.params, "n_regions": len(regions), **(extra_params or {})}
    params.pop("release_stop_cut", None)
    if moved:
        params["release_stop_cut"] = moved
    applied = [t.params["repetition_applied"] for t in traces if "repetition_applied" in t.params]
    if applied:  # the AR repetition rules of every task the parts decoded (decoding/repetition.py)
        params["repetition_applied"] = {"rules": applied[0]["rules"],
                                        "by_task": {k: v for a in applied for k, v in a["by_task"].items()}}
    return Trace(
        decoder=first.decoder, model=first.model, params=params, page=replace(first.page, occluded=occluded), text=text,
        metrics=metrics,
        regions=regions, steps=steps, gt_text=gt_text, vocab=vocab, verifier=first.verifier,
    )
