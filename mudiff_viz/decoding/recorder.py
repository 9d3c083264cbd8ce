"""Step recording shared by both decoders, and the assembly of the final Trace.

Recorded tensors stay on the model's device while a block runs and move to the host once per
block (``flush``), so recording adds no per-step device synchronisation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from mudiff_viz.core import align
from mudiff_viz.core.metrics import cer
from mudiff_viz.core.trace import TOPK, RegionRecord, StepRecord, TokenRecord, Trace, rnd


@dataclass
class _Pending:
    rows: torch.Tensor  # (b,) region indices
    offset: int  # absolute position of column 0 (block start)
    masked: torch.Tensor  # (b, L) bool: masked before this step
    x0: torch.Tensor  # (b, L)
    conf: torch.Tensor  # (b, L)
    committed: torch.Tensor  # (b, L) bool
    top_p: torch.Tensor  # (b, L, k)
    top_i: torch.Tensor  # (b, L, k)
    clock: int
    block: int
    forced: torch.Tensor | None = None  # (b, L) bool


class Clock:
    """Wall-clock times of each forward on the shared clock, taken at the loop's own sync points."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.times: list[float] = []
        self.prefill_s = 0.0

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def mark_prefill(self) -> None:
        self.prefill_s = self.now()

    def tick(self) -> None:
        """The forward for the next clock index has finished (called right after a host sync)."""
        self.times.append(self.now())

    def time_of(self, clock: int) -> float:
        return self.times[clock] if clock < len(self.times) else (self.times[-1] if self.times else 0.0)


@dataclass
class StepRecorder:
    enabled: bool = True
    topk: int = TOPK
    pending: list[_Pending] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)

    def add(self, rows, offset, masked, x0, conf, committed, probs, clock, block, forced=None) -> None:
        if not self.enabled:
            return
        top = probs.topk(self.topk, dim=-1)
        self.pending.append(_Pending(rows, offset, masked, x0, conf, committed, top.values, top.indices, clock, block, forced))

    def flush(self, clock: Clock) -> None:
        """Move this block's records to the host in one transfer per field and expand them."""
        if not self.pending:
            return
        sizes = [p.rows.numel() for p in self.pending]
        cat = lambda name: torch.cat([getattr(p, name) for p in self.pending]).cpu().numpy()  # noqa: E731
        rows, masked, x0, conf = cat("rows"), cat("masked"), cat("x0"), cat("conf")
        committed, top_p, top_i = cat("committed"), cat("top_p"), cat("top_i")
        forced = (
            torch.cat([p.forced if p.forced is not None else torch.zeros_like(p.masked) for p in self.pending]).cpu().numpy()
        )
        meta = [(p.offset, p.clock, p.block) for p, n in zip(self.pending, sizes) for _ in range(n)]
        for i, (offset, clk, block) in enumerate(meta):
            cols = np.flatnonzero(masked[i])
            self.steps.append(
                StepRecord(
                    nfe=clk,
                    region=int(rows[i]),
                    block=block,
                    time_s=rnd(clock.time_of(clk)),
                    positions=(cols + offset).tolist(),
                    candidates=x0[i, cols].tolist(),
                    confidences=[rnd(c) for c in conf[i, cols].tolist()],
                    committed=committed[i, cols].astype(int).tolist(),
                    topk=[_alternatives(ti, tp) for ti, tp in zip(top_i[i, cols].tolist(), top_p[i, cols].tolist())],
                    forced=int(forced[i].sum()),
                )
            )
        self.pending.clear()


def _alternatives(ids: list[int], probs: list[float]) -> list[list[float]]:
    """Top-k as [[id, p], ...]: p to 3 decimals (display precision), alternatives under 0.05% dropped."""
    return [[int(t), round(p, 3)] for k, (t, p) in enumerate(zip(ids, probs)) if k == 0 or p >= 0.0005]


def build_trace(
    *,
    decoder: str,
    backend,
    page,
    regions,
    params: dict,
    ids: list[list[int]],
    commit_clock: list[list[int]],
    confidence: list[list[float]],
    n_generated: list[int],
    region_prefill: list[float],
    recorder: StepRecorder,
    clock: Clock,
    seq_forwards: int,
    commit_passes: int,
    batched_forwards: int,
    ctx=None,
    truncated: str | None = None,
) -> Trace:
    """Assemble the Trace from the decoders' per-region results."""
    wall = clock.now()
    region_records: list[RegionRecord] = []
    vocab: dict[str, str] = {}
    n_tokens = 0
    for ri, region in enumerate(regions):
        tokens: list[TokenRecord] = []
        # sequence-aware texts when the backend has them (byte-level BPE splits characters)
        seq_texts = backend.token_texts(ids[ri]) if hasattr(backend, "token_texts") else None
        for pos, tok_id in enumerate(ids[ri]):
            text = seq_texts[pos] if seq_texts is not None else backend.token_text(tok_id)
            stop = tok_id in backend.stop_ids
            tokens.append(
                TokenRecord(
                    text="" if stop else text,
                    id=int(tok_id),
                    commit_step=int(commit_clock[ri][pos]),
                    commit_time_s=rnd(clock.time_of(commit_clock[ri][pos])),
                    confidence=rnd(min(1.0, max(0.0, confidence[ri][pos]))),
                    stop=stop,
                )
            )
        n_tokens += len(tokens)
        texts = [t.text for t in tokens]
        boxes = None
        if region.gt_chars:
            boxes = align.token_boxes(texts, region.gt_chars)
        elif hasattr(backend, "token_boxes"):
            boxes = backend.token_boxes(page, region, ctx, ri, ids[ri])
        if boxes:
            for t, b in zip(tokens, boxes):
                t.box = None if (b is None or t.stop) else [round(v, 1) for v in b]
        region_records.append(
            RegionRecord(
                bbox=[round(v, 1) for v in region.bbox],
                text="".join(texts),
                tokens=tokens,
                gt_text=region.gt_text,
                kind=region.kind,
                n_generated=n_generated[ri],
                prefill_s=rnd(region_prefill[ri]),
            )
        )
    for s in recorder.steps:
        for pairs in s.topk:
            for tok_id, _ in pairs:
                vocab.setdefault(str(tok_id), backend.token_text(tok_id))
    for r in region_records:
        for t in r.tokens:
            vocab.setdefault(str(t.id), backend.token_text(t.id))
    text = "\n".join(r.text for r in region_records)
    gt_text = None
    if all(r.gt_text is not None for r in region_records) and region_records:
        gt_text = "\n".join(r.gt_text for r in region_records)
    nfe = seq_forwards + commit_passes
    metrics = {
        "nfe": nfe,
        "commit_passes": commit_passes,
        "batched_forwards": batched_forwards,
        "tokens": n_tokens,
        "text_chars": len(text),
        "tokens_per_forward": rnd(n_tokens / nfe) if nfe else 0.0,
        "wall_s": rnd(wall),
        "prefill_s": rnd(clock.prefill_s),
        "decode_s": rnd(max(0.0, wall - clock.prefill_s)),
        "time_to_first_token_s": rnd(min((t.commit_time_s for r in region_records for t in r.tokens), default=0.0)),
    }
    if gt_text is not None:
        metrics["cer"] = rnd(cer(text, gt_text))
    if truncated:
        metrics["truncated"] = truncated
    return Trace(
        decoder=decoder,
        model={"name": backend.name, "spec": backend.spec, "params_m": backend.params_m},
        params=params,
        page=page.info(),
        text=text,
        metrics=metrics,
        regions=region_records,
        steps=recorder.steps,
        gt_text=gt_text,
        vocab=vocab,
    )
