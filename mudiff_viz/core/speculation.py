"""What a draft-and-verify trace says about its drafts: pure functions of the step records' verdicts
(core/trace.py ``VERDICTS``), shared by the corpus rows, the notebook frames and the charts.

The *frontier* of a verify forward is the first position it verified (the position right after the
text verified before it); a draft's *offset* is its distance from there. A verify forward's
accepted drafts are a prefix, so the acceptance rate at offset ``o`` is the share of verify forwards
with more than ``o`` drafts that accepted more than ``o``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from mudiff_viz.core.trace import ACCEPTED, COMMITTING, DRAFTED, VERDICTS, StepRecord, Trace


@dataclass(frozen=True)
class StepDrafts:
    drafted: int  # drafts this forward proposed for a later one
    verified: int  # drafts this forward verified (discarded ones included)
    accepted: int  # of them kept
    committed: int  # tokens committed (accepted drafts + the verifier's own token)
    frontier: int | None  # the first position verified (None: a forward that only drafted)


def step_drafts(step: StepRecord) -> StepDrafts:
    verdicts = step.verdicts or ()
    verified = [(p, v, d) for p, v, d in zip(step.positions, verdicts, step.drafts or ()) if v != DRAFTED]
    return StepDrafts(
        drafted=sum(1 for v in verdicts if v == DRAFTED),
        verified=sum(1 for _, _, d in verified if d >= 0),
        accepted=sum(1 for _, v, _ in verified if v == ACCEPTED),
        committed=sum(1 for _, v, _ in verified if v in COMMITTING),
        frontier=min((p for p, _, _ in verified), default=None),
    )


@dataclass(frozen=True)
class TokenVerdict:
    verdict: str  # how it was committed: "accepted" (a draft kept), "rejected" (the verifier's token in a draft's place), "bonus"
    offset: int  # its distance from the frontier of the forward that committed it
    drafted_at: int | None  # the forward that drafted what stood at its position (None: nothing was drafted)


def token_verdicts(trace: Trace) -> dict[tuple[int, int], TokenVerdict]:
    """(region, position) -> how the token there was committed, for every committed token."""
    out: dict[tuple[int, int], TokenVerdict] = {}
    drafted_at: dict[tuple[int, int], int] = {}
    for s in sorted(trace.steps, key=lambda s: s.forward):
        if s.verdicts is None:
            continue
        frontier = step_drafts(s).frontier
        for p, v, c in zip(s.positions, s.verdicts, s.committed):
            key = (s.region, p)
            if c and v in COMMITTING:
                out[key] = TokenVerdict(VERDICTS[v], p - frontier, drafted_at.get(key))
        for p, v in zip(s.positions, s.verdicts):
            if v == DRAFTED:
                drafted_at[(s.region, p)] = s.forward
    return out


def acceptance_by_offset(trace: Trace) -> list[tuple[int, int, int]]:
    """(offset, drafts verified at that offset, accepted) for offsets 0 .. the longest draft."""
    verified: Counter = Counter()
    accepted: Counter = Counter()
    for s in trace.steps:
        if s.verdicts is None:
            continue
        d = step_drafts(s)
        for o in range(d.verified):
            verified[o] += 1
            accepted[o] += o < d.accepted
    return [(o, verified[o], accepted[o]) for o in sorted(verified)]


def tokens_per_cycle(trace: Trace) -> Counter:
    """How many tokens each (region, verify forward) committed: the histogram of cycle yields."""
    return Counter(d.committed for s in trace.steps if s.verdicts is not None and (d := step_drafts(s)).frontier is not None)
