"""Every count a view shows, read off a trace in one place (docs/trace.md#counts).

The player's header, captions and charts, the summary line, the live status and the trace checks
all read these numbers, so two views of one frame cannot disagree. Counts are per forward (index
``k`` is forward ``k`` on the shared clock; the player's frame ``k + 1`` shows its outcome) and per
trace. Words used everywhere:

- *region*: one sequence the decoder reads (a text line, a layout block, or the whole page);
- *position*: one place of a region's output, masked until a forward commits it;
- *token*: a position of the final text (its stop token included);
- *filler*: a position after the end of the text (after the stop token) that a block committed and
  the text drops;
- *forward*: one tick of the shared clock (a batched model call over the regions it decodes);
- *NFE*: forwards per region, summed over the regions, plus one cache-storing pass per finished
  block (diffusion): what the decode cost per sequence, whatever the batching.

Nothing here imports the trace module: the counts read a trace's attributes only, so the trace's
own checks (core/trace.py ``check_meaning``) can use them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# verdicts of a draft-and-verify step (core/trace.py VERDICTS)
DRAFTED, ACCEPTED, REJECTED, DISCARDED, BONUS = 0, 1, 2, 3, 4

GLOSSARY: dict[str, str] = {
    "masks left": "positions still masked in the blocks this forward denoised, after it",
    "committed this step": "positions this forward committed: tokens of the text plus fillers after its end",
    "tokens": "positions of the final text, each region's stop token included",
    "fillers": "positions after a region's end of text that a block committed and the text drops",
    "regions decoding": "regions (lines or layout blocks) this forward decoded",
    "forwards": "ticks of the shared clock: batched model calls over the regions still decoding",
    "NFE": "forwards per region summed over the regions, plus one pass per finished block that stores it",
    "tokens per forward": "tokens / NFE",
    "drafts verified": "drafts this forward judged: accepted, rejected or discarded",
    "steps per block": "forwards that denoised one region's block",
}


@dataclass(frozen=True)
class ForwardCounts:
    """Per forward ``k`` (lists as long as the clock)."""

    masks_left: list[int]  # positions still masked after forward k in the blocks it denoised
    opened: list[int]  # masked positions of the blocks whose first forward is k
    committed: list[int]  # positions committed by forward k = tokens + fillers
    tokens: list[int]  # ... of them, tokens of the text (stop tokens included)
    fillers: list[int]  # ... of them, positions after the end of the text
    regions: list[int]  # regions decoded by forward k
    block: list[int | None]  # the lowest block forward k denoised (None: no step recorded)
    step: list[int]  # forward k is denoising step `step` (1-based) of its block ...
    steps: list[int]  # ... of a block that took `steps` forwards (the longest over the regions)
    forced: list[int]  # positions force-committed at the step limit
    verified: list[int]  # drafts judged by forward k (accepted + rejected + discarded)
    accepted: list[int]
    rejected: list[int]
    discarded: list[int]  # drafts after a rejected one (or past the end of text), thrown away
    bonus: list[int]  # the verifier's own tokens where there was no draft
    drafted: list[int]  # positions drafted by forward k for the next one to verify


@dataclass(frozen=True)
class TraceCounts:
    """A whole trace's counts, derived from its regions and steps (never from its metrics)."""

    per_forward: ForwardCounts
    regions: int  # regions in the trace
    tokens: int  # tokens of the text, stop tokens included
    fillers: int  # positions committed after the end of the text
    forwards: int  # the shared clock's length
    steps_per_region: list[int]  # recorded forwards (steps) of each region
    commit_passes: int  # one per (region, block) of a diffusion decode that closed (from metrics: not recorded per block)
    nfe: int  # recorded steps + commit passes: forwards summed over the regions
    steps_per_block: dict[tuple[int, int], int] = field(default_factory=dict)  # (region, block) -> forwards
    drafts_verified: int = 0
    drafts_accepted: int = 0

    @property
    def forwards_per_region(self) -> list[int]:
        """Recorded forwards of each region (a diffusion region's block-storing passes not included)."""
        return self.steps_per_region

    @property
    def tokens_per_forward(self) -> float:
        return self.tokens / self.nfe if self.nfe else 0.0


def filler_ranges(trace, partial: bool = False) -> list[tuple[int, int]]:
    """Per region, the positions that are fillers: from its last token (after the stop) up to what
    it generated; a streamed snapshot's positions past that belong to the block still being
    denoised (its pending tokens), so they count as tokens."""
    out = []
    for r in trace.regions:
        n = len(r.tokens)
        out.append((n, r.n_generated if partial else 1 << 62))
    return out


def trace_counts(trace, partial: bool = False) -> TraceCounts:
    """Every count of ``trace``; ``partial``: a streamed snapshot (see :func:`filler_ranges`)."""
    n = trace.clock_length
    z = lambda: [0] * n  # noqa: E731
    masks_left, opened, committed, tokens, fillers, regions, forced = z(), z(), z(), z(), z(), z(), z()
    verified, accepted, rejected, discarded, bonus, drafted = z(), z(), z(), z(), z(), z()
    block: list[int | None] = [None] * n
    fill = filler_ranges(trace, partial)
    first: dict[tuple[int, int], int] = {}
    last: dict[tuple[int, int], int] = {}
    per_region = [0] * len(trace.regions)
    seen_forward: set[tuple[int, int]] = set()
    for s in trace.steps:
        k = s.forward
        key = (s.region, s.block)
        new_block = key not in first
        first[key] = min(first.get(key, k), k)
        last[key] = max(last.get(key, k), k)
        if (s.region, k) not in seen_forward:
            seen_forward.add((s.region, k))
            regions[k] += 1
            per_region[s.region] += 1
        lo, hi = fill[s.region]
        if s.verdicts is None:
            masks_left[k] += len(s.positions) - sum(s.committed)
            if new_block:
                opened[k] += len(s.positions)
        for j, (p, c) in enumerate(zip(s.positions, s.committed)):
            if c:
                committed[k] += 1
                if lo <= p < hi:
                    fillers[k] += 1
                else:
                    tokens[k] += 1
            if s.verdicts is not None:
                v = s.verdicts[j]
                has_draft = s.drafts is not None and s.drafts[j] >= 0
                accepted[k] += v == ACCEPTED
                rejected[k] += v == REJECTED
                discarded[k] += v == DISCARDED and has_draft  # a query past the drafts threw nothing away
                bonus[k] += v == BONUS
                drafted[k] += v == DRAFTED
        forced[k] += s.forced
        block[k] = s.block if block[k] is None else min(block[k], s.block)
    if not trace.steps:  # recorded without steps: the commit forwards are all there is
        for r in trace.regions:
            for t in r.tokens:
                if 0 <= t.commit_forward < n:
                    committed[t.commit_forward] += 1
                    tokens[t.commit_forward] += 1
    # blocks are forwarded in order: a later step of the same block finds what the earlier one left
    step, steps = z(), z()
    for s in trace.steps:
        key = (s.region, s.block)
        step[s.forward] = max(step[s.forward], s.forward - first[key] + 1)
        steps[s.forward] = max(steps[s.forward], last[key] - first[key] + 1)
    for k in range(n):
        verified[k] = accepted[k] + rejected[k] + discarded[k]
    per_forward = ForwardCounts(
        masks_left=masks_left, opened=opened, committed=committed, tokens=tokens, fillers=fillers, regions=regions,
        block=block, step=step, steps=steps, forced=forced, verified=verified, accepted=accepted,
        rejected=rejected, discarded=discarded, bonus=bonus, drafted=drafted,
    )
    blocks: dict[tuple[int, int], int] = {}
    for s in trace.steps:
        blocks[(s.region, s.block)] = blocks.get((s.region, s.block), 0) + 1
    commit_passes = int(trace.metrics.commit_passes)
    n_tokens = sum(len(r.tokens) for r in trace.regions)
    return TraceCounts(
        per_forward=per_forward, regions=len(trace.regions),
        tokens=n_tokens if not partial else sum(tokens) if trace.steps else n_tokens,
        fillers=sum(fillers), forwards=n, steps_per_region=per_region, commit_passes=commit_passes,
        nfe=len(trace.steps) + commit_passes, steps_per_block=blocks,
        drafts_verified=sum(verified), drafts_accepted=sum(accepted),
    )


def metric_problems(trace) -> list[str]:
    """Where the trace's ``metrics`` disagree with what its regions and steps say (empty: none).

    Checked: ``tokens`` (the regions' tokens), ``text_chars`` (the text's length),
    ``tokens_per_forward`` (tokens / NFE, to its 4 significant digits), ``nfe`` (steps + commit
    passes, checked by core/trace.py), ``accepted`` at most ``drafted`` (the decoder counts both
    before the text is cut at its stop token or token limit, so the verdicts may differ), that the
    model calls fill the clock at least and that no more blocks were stored than denoised."""
    m = trace.metrics
    out: list[str] = []
    n_tokens = sum(len(r.tokens) for r in trace.regions)
    if m.tokens != n_tokens:
        out.append(f"metrics.tokens {m.tokens} != {n_tokens} tokens in the regions")
    if m.text_chars != len(trace.text):
        out.append(f"metrics.text_chars {m.text_chars} != {len(trace.text)} characters of text")
    if m.nfe < 0 or m.commit_passes < 0 or m.batched_forwards < 0:
        out.append("metrics.nfe, commit_passes and batched_forwards must be >= 0")
        return out
    want = n_tokens / m.nfe if m.nfe else 0.0
    if abs(m.tokens_per_forward - want) > 1e-3 * max(1.0, want):
        out.append(f"metrics.tokens_per_forward {m.tokens_per_forward} != {round(want, 4)} (tokens / nfe)")
    if m.accepted is not None and m.drafted is not None and not 0 <= m.accepted <= m.drafted:
        out.append(f"metrics.accepted {m.accepted} is not between 0 and the {m.drafted} drafts verified")
    if trace.steps:
        c = trace_counts(trace)
        if m.batched_forwards < trace.clock_length:
            out.append(f"metrics.batched_forwards {m.batched_forwards}: fewer model calls than the {trace.clock_length} forwards on the clock")
        if trace.decoder == "ar" and m.commit_passes:
            out.append(f"metrics.commit_passes {m.commit_passes}: AR stores no blocks")
        elif m.commit_passes > len(c.steps_per_block) and trace.block_length:
            out.append(f"metrics.commit_passes {m.commit_passes}: more blocks stored than the {len(c.steps_per_block)} denoised")
    return out
