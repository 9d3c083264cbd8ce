"""A finished decode -> its Trace, and the one place run metrics are computed.

``run_metrics`` is shared by a single decode (:func:`build_trace`) and by merging per-region
decodes back to back (decoding/sequential.py), so both count forwards, tokens and times alike.
"""

from __future__ import annotations

from dataclasses import replace

from mudiff_viz.core import align
from mudiff_viz.core.metrics import cer
from mudiff_viz.core.trace import (  # noqa: F401 (joined_text: decoders read it from here)
    Metrics, ModelRecord, Occlusion, PageRecord, RegionRecord, Skew, TokenRecord, Trace, joined_text, rnd,
)


SPECULATION = ("draft_forwards", "verify_forwards", "drafted", "accepted", "anchor_hits")  # Metrics' draft-and-verify counts


def run_metrics(
    regions: list[RegionRecord], seq_forwards: int, commit_passes: int, batched_forwards: int, wall_s: float,
    prefill_s: float, text: str, gt_text: str | None, truncated: str | None = None, regions_decoded: int | None = None,
    speculation: dict[str, int] | None = None, recording_s: float | None = None,
) -> Metrics:
    """Counts and times of a decode (docs/trace.md#conventions): ``nfe`` counts forwards per
    sequence (denoising forwards plus block-commit passes; a draft-and-verify decode's every forward
    of every model), so batching does not inflate ``tokens_per_forward``; ``batched_forwards``
    counts the model calls. ``speculation``: the draft-and-verify counts (:data:`SPECULATION`).
    ``recording_s``: the seconds of ``wall_s`` spent making step records (None: not recorded)."""
    n_tokens = sum(len(r.tokens) for r in regions)
    nfe = seq_forwards + commit_passes
    return Metrics(
        nfe=nfe,
        commit_passes=commit_passes,
        batched_forwards=batched_forwards,
        tokens=n_tokens,
        text_chars=len(text),
        tokens_per_forward=rnd(n_tokens / nfe) if nfe else 0.0,
        wall_s=rnd(wall_s),
        prefill_s=rnd(prefill_s),
        decode_s=rnd(max(0.0, wall_s - prefill_s)),
        time_to_first_token_s=rnd(min((t.commit_time_s for r in regions for t in r.tokens), default=0.0)),
        regions_decoded=regions_decoded,
        cer=None if gt_text is None else rnd(cer(text, gt_text)),
        truncated=truncated or None,
        recording_s=None if recording_s is None else rnd(recording_s),
        **(speculation or {}),
    )


def model_record(backend) -> ModelRecord:
    return ModelRecord(name=backend.name, spec=backend.spec, params_m=backend.params_m, mask_id=backend.mask_id,
                       exec_mode=backend.exec_mode)


def page_record(page, regions=()) -> PageRecord:
    """The trace's page record; each occluded word is located in the regions' ground truth."""
    info = page.info()
    occluded = [locate_occlusion(Occlusion(**o), regions) for o in info.pop("occluded", [])]
    skew = info.pop("skew", None)
    return PageRecord(**info, occluded=occluded, skew=Skew(**skew) if skew else None)


def locate_occlusion(occ: Occlusion, regions) -> Occlusion:
    """The region and ground-truth character span whose character boxes' centres lie in the box."""
    x0, y0, x1, y1 = occ.box
    for ri, region in enumerate(regions):
        inside = [i for i, (_, b) in enumerate(region.gt_chars or ())
                  if x0 <= (b[0] + b[2]) / 2 <= x1 and y0 <= (b[1] + b[3]) / 2 <= y1]
        if inside:
            return replace(occ, region=ri, start=min(inside), end=max(inside) + 1)
    return occ


def limit_cut(run) -> str | None:
    """Why regions stopped at their token limit rather than at a stop token ("cut at 1024 tokens"),
    or None. A diffusion region writes whole blocks, so it may hold more than ``max_new_tokens``:
    the reason then says so."""
    limit = run.params.max_new_tokens
    cut = [s.n_generated for s in run.states
           if s.n_generated >= limit and not any(t in run.stop_set for t in s.ids)]
    if not cut:
        return None
    n = max(cut)
    why = f" (max tokens {limit}, written in whole blocks of {run.params.block_length})" if n > limit else ""
    regions = f", {len(cut)} of {len(run.states)} regions" if len(run.states) > 1 else ""
    return f"cut at {n} tokens{why}{regions}"


def build_trace(run, ctx) -> Trace:
    """Assemble the Trace of a finished :class:`~mudiff_viz.decoding.run.DecodeRun`."""
    backend, clock = run.backend, run.clock
    wall = clock.now()
    records: list[RegionRecord] = []
    release_order = getattr(backend, "release_stop_order", ())
    moved = []  # regions whose release cut would lie elsewhere (docs/real-models.md#the-decoding-loop)
    for ri, (region, full) in enumerate(zip(run.regions, run.states)):
        state = full.cut_at_stop(run.stop_set)
        if full.release_cut_moves(len(state.ids), release_order):
            moved.append(ri)
        texts = backend.token_texts(state.ids)
        tokens = []
        for text, tok_id, forward, conf in zip(texts, state.ids, state.commit_forward, state.confidence):
            stop = tok_id in run.stop_set
            tokens.append(TokenRecord(
                text="" if stop else text, id=int(tok_id), commit_forward=int(forward),
                commit_time_s=rnd(clock.time_of(forward)), confidence=rnd(min(1.0, max(0.0, conf))), stop=stop,
            ))
        shown = [t.text for t in tokens]
        boxes = align.token_boxes(shown, region.gt_chars) if region.gt_chars else backend.token_boxes(
            run.page, region, ctx, ri, state.ids)
        for t, b in zip(tokens, boxes or []):
            t.box = None if (b is None or t.stop) else [round(v, 1) for v in b]
        records.append(RegionRecord(
            bbox=[round(v, 1) for v in region.bbox], text="".join(shown), tokens=tokens, gt_text=region.gt_text,
            kind=region.kind, n_generated=full.n_generated, prefill_s=rnd(clock.prefill_s),
        ))
    # every id the trace shows (its records' alternatives, then its tokens), each looked up once
    seen = dict(run.recorder.seen) if run.recorder else {}  # the recorder keeps the ids its records show
    recording_s = run.recorder.seconds if run.recorder else None
    seen.update(dict.fromkeys(t.id for r in records for t in r.tokens))
    vocab = {str(i): backend.token_text(i) for i in seen}
    text, gt_text = joined_text(records)
    reasons = [r for r in (run.truncated, limit_cut(run)) if r]
    metrics = run_metrics(records, run.seq_forwards, run.commit_passes, run.batched_forwards, wall, clock.prefill_s,
                          text, gt_text, "; ".join(reasons) or None, speculation=run.speculation,
                          recording_s=recording_s)
    params = {**run.trace_params(), **({"release_stop_cut": moved} if moved else {})}
    return Trace(
        decoder=run.decoder, model=model_record(backend), params=params, page=page_record(run.page, run.regions),
        text=text, metrics=metrics, regions=records, steps=run.steps, gt_text=gt_text, vocab=vocab,
        verifier=model_record(run.verifier) if run.verifier is not None else None,
    )
