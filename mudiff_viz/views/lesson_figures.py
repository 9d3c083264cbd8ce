"""Figures a lesson's prose quotes, each read from the recording the lesson plays.

A lesson's text is a template (``str.format`` fields such as ``{1.forwards}``: pane 1's forward
passes); :func:`render` fills it from :class:`RunFigures` of each pane's trace, so prose and
recording cannot drift. Every count goes through ``core/metrics.py`` (one place to re-point when a
single source of counts exists). A figure the trace lacks is refused (:class:`MissingFigure`),
never printed as None or nan.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass
from typing import Any

from mudiff_viz.core.counts import trace_counts
from mudiff_viz.core.metrics import first_step_share, mean_steps_per_block, order_correlation, steps_per_block
from mudiff_viz.core.trace import Trace

PAIR_NAMES = {"nano": "character pair", "nano-subword": "subword pair"}  # the embedded pairs by spec
SAMPLING = {0.0: "greedy"}  # temperature 0 is argmax: said as a word, never as a raw 0


class MissingFigure(ValueError):
    """A template asked for a figure its recording does not hold (None or nan)."""


@dataclass(frozen=True)
class RunFigures:
    """One recorded run's figures under the names lesson templates use (None: not this decoder's)."""

    # what ran
    spec: str  # the model family the run loaded (``nano``, ``nano-subword``)
    model: str  # the decoding model's own name
    params_m: float  # its parameters, millions
    verifier: str | None  # the speculative decoder's AR verifier
    decoder: str
    sampling: str  # "greedy" or "temperature 0.7"
    # settings as they ran (the trace's params: resolved values)
    block_length: int | None
    steps: int | None
    threshold: float | None
    strategy: str | None
    quota: int | None  # positions a step commits at least: block_length // steps
    draft_length: int | None
    draft_floor: float | None
    acceptance: str | None
    draft_branches: str | None
    # what it did
    lines: int  # regions decoded
    forwards: int  # forward passes on the player's clock
    blocks: int | None  # (line, block) pairs denoised
    steps_per_block: float | None  # denoising forwards per block, averaged
    fewest_steps: int | None  # the quickest block's forwards
    most_steps: int | None  # the slowest block's forwards
    first_forward_tokens: int  # tokens committed at the clock's first forward, every line together
    first_forward_lines: int  # lines the first forward worked on
    first_step_share: float | None  # share of tokens committed at their block's first step
    tokens_per_forward: float
    order: float | None  # decoding order vs position (Spearman r)
    cer: float | None  # character error rate, percent
    drafted: int | None  # drafts verified
    accepted: int | None  # drafts the verifier agreed with
    rejected: int | None  # drafts the verifier replaced with its own token
    discarded: int | None  # drafts after a rejection, never judged
    tokens_per_verify: float | None  # tokens per verify forward (draft-and-verify)

    @property
    def pair(self) -> str:
        """The embedded pair in words ("subword pair"), else the spec itself."""
        return PAIR_NAMES.get(self.spec, self.spec)

    @property
    def floor_said(self) -> str:
        """The draft floor as it ran: "draft floor 0.1", or "no draft floor" for 0 (keep every draft)."""
        if self.draft_floor is None:
            raise MissingFigure("the draft floor: the run drafts nothing")
        return f"draft floor {self.draft_floor:g}" if self.draft_floor else "no draft floor"

    @property
    def steps_said(self) -> str:
        """Forwards per block in words: "exactly 4" when every block took the same, else "6 to 30"."""
        if self.fewest_steps is None or self.most_steps is None:
            raise MissingFigure("steps per block: the run has no blocks")
        if self.fewest_steps == self.most_steps:
            return f"exactly {self.fewest_steps}"
        return f"{self.fewest_steps} to {self.most_steps}"


def run_figures(trace: Trace) -> RunFigures:
    """Every figure a lesson quotes of one run, read from its trace."""
    p, m = trace.params, trace.metrics
    blockwise = trace.block_length is not None and bool(trace.steps)
    counts = steps_per_block(trace) if blockwise else []
    first = min((s.forward for s in trace.steps), default=0)
    temperature = float(p.get("temperature", 0.0))
    bl, steps = p.get("block_length"), p.get("steps")
    c = trace_counts(trace)  # the drafts as the player's header and charts count them: from the records
    verdicts = trace.is_speculative
    return RunFigures(
        spec=trace.model.spec, model=trace.model.name, params_m=trace.model.params_m,
        verifier=trace.verifier.name if trace.verifier is not None else None,
        decoder=trace.decoder,
        sampling=SAMPLING.get(temperature, f"temperature {temperature:g}"),
        block_length=bl if trace.decoder == "diffusion" else None,
        steps=steps if trace.decoder == "diffusion" else None,
        threshold=p.get("threshold") if trace.decoder == "diffusion" else None,
        strategy=p.get("strategy") if trace.decoder == "diffusion" else None,
        quota=max(1, bl // steps) if trace.decoder == "diffusion" and bl and steps else None,
        draft_length=p.get("draft_length") or None,  # 0 is "the model's own": a trace records the resolved length
        draft_floor=p.get("draft_floor"), acceptance=p.get("acceptance"), draft_branches=p.get("draft_branches"),
        lines=len(trace.regions), forwards=trace.clock_length,
        blocks=len(counts) if counts else None,
        steps_per_block=mean_steps_per_block(trace) if blockwise else None,
        fewest_steps=min(counts) if counts else None, most_steps=max(counts) if counts else None,
        first_forward_tokens=sum(t.commit_forward == first for r in trace.regions for t in r.tokens),
        first_forward_lines=len({s.region for s in trace.steps if s.forward == first}),
        first_step_share=first_step_share(trace) if blockwise else None,
        tokens_per_forward=m.tokens_per_forward,
        order=order_correlation(trace),
        cer=100 * m.cer if m.get("cer") is not None else None,
        drafted=c.drafts_verified if verdicts else None, accepted=c.drafts_accepted if verdicts else None,
        rejected=sum(c.per_forward.rejected) if verdicts else None,
        discarded=sum(c.per_forward.discarded) if verdicts else None,
        tokens_per_verify=trace.n_tokens / m.verify_forwards if m.get("verify_forwards") else None,
    )


def times(more: float, fewer: float) -> str:
    """How many times ``more`` is ``fewer``, as prose: "3 times", "about 2.5 times"."""
    if not fewer:
        raise MissingFigure("a ratio over zero")
    ratio = more / fewer
    return f"{ratio:.0f} times" if abs(ratio - round(ratio)) < 0.05 else f"about {ratio:.1f} times"


def per_block(panes: list[RunFigures]) -> str:
    """Forwards per block across panes: "exactly 1 forward per block in both panes" when every block
    of every pane took the same, else each pane's range ("6 to 30 and exactly 4 forwards per block")."""
    spans = {(p.fewest_steps, p.most_steps) for p in panes}
    if any(None in s for s in spans):
        raise MissingFigure("steps per block: a run has no blocks")
    low, high = next(iter(spans))
    if len(spans) == 1 and low == high:
        where = "both panes" if len(panes) == 2 else "every pane"
        return f"exactly {low} forward{'' if low == 1 else 's'} per block in {where}"
    return " and ".join(p.steps_said for p in panes) + " forwards per block"


class _Filler(string.Formatter):
    """str.format that refuses None and nan and remembers every text it put in."""

    def __init__(self) -> None:
        self.filled: list[str] = []

    def format_field(self, value: Any, format_spec: str) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            raise MissingFigure("a figure the recording does not hold")
        text = super().format_field(value, format_spec)
        self.filled.append(text)
        return text


class _Blank(string.Formatter):
    """Fills every field with an ellipsis: the template's words with no recording to quote."""

    def get_field(self, field_name: str, args, kwargs):
        return "…", field_name

    def format_field(self, value: Any, format_spec: str) -> str:
        return "…"


def render(template: str, panes: list[RunFigures] | None, **derived: Any) -> str:
    """The template filled from the panes' figures (``{0.forwards}``) and lesson-level ones
    (``{times}``); with no panes (no recording), every figure is an ellipsis."""
    return filled(template, panes, **derived)[0]


def filled(template: str, panes: list[RunFigures] | None, **derived: Any) -> tuple[str, list[str]]:
    """The rendered text and each text a field put into it (what tests check numbers against)."""
    if panes is None:
        return _Blank().format(template), []
    filler = _Filler()
    return filler.format(template, *panes, **derived), filler.filled

