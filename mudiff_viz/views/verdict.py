"""Who won a Compare run, on which clock, and why: the verdict line and the spread over rounds.

A run has rounds; each round decodes the page once with every decoder (interleaved, so load that
drifts during the run lands in every decoder's spread instead of in one decoder's time). Two clocks
count a decode: forward passes (batched model calls, what the player's clock counts) and seconds of
decode (wall time after the prefill, which every decoder pays alike). One diffusion forward
processes a whole block, so it costs more than one AR forward: the verdict says how many.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from mudiff_viz.core.trace import Trace
from mudiff_viz.views.labels import counted, decoder_label


@dataclass(frozen=True)
class Spread:
    """The median of a few measurements and their range (min, max) over ``n`` of them."""

    median: float
    low: float
    high: float
    n: int

    @property
    def width(self) -> float:
        return self.high - self.low


def spread(values: list[float]) -> Spread:
    """Median and range of ``values`` (at least one)."""
    if not values:
        raise ValueError("a spread needs at least one value")
    return Spread(float(statistics.median(values)), float(min(values)), float(max(values)), len(values))


@dataclass(frozen=True)
class DecoderRuns:
    """One decoder over every round: forwards and seconds of decode, median and range."""

    decoder: str
    forwards: Spread  # batched forward passes (the shared clock)
    decode_s: Spread  # wall time after the prefill
    wall_s: Spread  # the whole request, prefill included


@dataclass(frozen=True)
class Matchup:
    """A decoder against AR: how many times faster on each clock, per round paired, and what one of
    its forwards costs in AR forwards (its seconds per forward over AR's)."""

    decoder: DecoderRuns
    ar: DecoderRuns
    wall_speedup: Spread  # AR's decode seconds / the decoder's, round by round
    forward_ratio: Spread  # AR's forwards / the decoder's
    forward_cost: Spread  # (decoder s per forward) / (AR s per forward), round by round

    @property
    def wall_winner(self) -> str | None:
        """The decoder faster on wall time in every round; None when the rounds disagree."""
        if self.wall_speedup.low > 1:
            return self.decoder.decoder
        if self.wall_speedup.high < 1:
            return self.ar.decoder
        return None


def rounds_by_decoder(rounds: list[list[Trace]]) -> dict[str, list[Trace]]:
    """Each decoder's traces, in round order (a round holds one trace per decoder)."""
    out: dict[str, list[Trace]] = {}
    for rnd in rounds:
        for t in rnd:
            out.setdefault(t.decoder, []).append(t)
    return out


def decoder_runs(traces: list[Trace]) -> DecoderRuns:
    return DecoderRuns(traces[0].decoder, spread([t.clock_length for t in traces]),
                       spread([t.metrics.decode_s for t in traces]), spread([t.metrics.wall_s for t in traces]))


def _per_forward(t: Trace) -> float:
    return t.metrics.decode_s / max(1, t.clock_length)


def matchups(rounds: list[list[Trace]]) -> list[Matchup]:
    """Every decoder other than AR against AR, paired round by round (none without an AR trace)."""
    by = rounds_by_decoder(rounds)
    ars = by.get("ar")
    if not ars:
        return []
    out = []
    for decoder, traces in by.items():
        if decoder == "ar":
            continue
        pairs = list(zip(ars, traces))
        out.append(Matchup(
            decoder=decoder_runs(traces), ar=decoder_runs(ars),
            wall_speedup=spread([a.metrics.decode_s / max(d.metrics.decode_s, 1e-9) for a, d in pairs]),
            forward_ratio=spread([a.clock_length / max(1, d.clock_length) for a, d in pairs]),
            forward_cost=spread([_per_forward(d) / max(_per_forward(a), 1e-9) for a, d in pairs]),
        ))
    return out


def _r(v: float) -> str:
    """A ratio to the digits that matter: 1.04, 4.6, 12."""
    return f"{v:.2f}" if v < 2 else f"{v:.1f}" if v < 10 else f"{v:.0f}"


def _x(s: Spread) -> str:
    """A ratio and, in brackets, its range over the rounds: '1.52x (1.45–1.60x over 3 rounds)'."""
    if s.n == 1:
        return f"{_r(s.median)}x", "one round: no spread"
    if _r(s.low) == _r(s.high):
        return f"{_r(s.median)}x", f"the same in all {s.n} rounds"
    return f"{_r(s.median)}x", f"{_r(s.low)}–{_r(s.high)}x over {s.n} rounds"


def _s(s: Spread, what: str = "") -> str:
    if s.n == 1 or f"{s.low:.2f}" == f"{s.high:.2f}":
        return f"{s.median:.2f} s{what}"
    return f"{s.median:.2f} s{what} (range {s.low:.2f}–{s.high:.2f})"


def _fwd(s: Spread) -> str:
    if s.low == s.high:
        return counted(int(s.median), "forward")
    return f"{s.median:g} forwards (range {s.low:g}–{s.high:g})"


def matchup_line(m: Matchup) -> str:
    """One sentence: both decoders on both clocks, who is faster by how much (with the spread), and
    why (what one of its forwards costs in AR forwards)."""
    me, ar = decoder_label(m.decoder.decoder), decoder_label(m.ar.decoder)
    head = (f"**{me}** finished in {_fwd(m.decoder.forwards)} and {_s(m.decoder.decode_s, ' of decode')}, "
            f"**{ar}** in {_fwd(m.ar.forwards)} and {_s(m.ar.decode_s)}: ")
    w = m.wall_winner
    if w is None:
        ratio, rng = _x(m.wall_speedup)
        wall = f"no winner on wall time (AR's decode time over {me}'s: {ratio}, {rng}, a range that reaches 1x)"
    else:
        s = m.wall_speedup if w == m.decoder.decoder else Spread(1 / m.wall_speedup.median, 1 / m.wall_speedup.high,
                                                                   1 / m.wall_speedup.low, m.wall_speedup.n)
        ratio, rng = _x(s)
        wall = f"{decoder_label(w)} is **{ratio} faster on wall time** ({rng})"
    r = m.forward_ratio.median
    fwd = f"**{_r(r)}x fewer forwards**" if r >= 1 else f"**{_r(1 / r)}x more forwards**"
    cost_rng = (f" ({_r(m.forward_cost.low)}–{_r(m.forward_cost.high)})"
                if m.forward_cost.n > 1 and _r(m.forward_cost.low) != _r(m.forward_cost.high) else "")
    cost = f"one {me} forward costs {_r(m.forward_cost.median)} AR forwards here{cost_rng}"
    return head + wall + ", " + fwd + "; " + cost + "."


def verdict_markdown(rounds: list[list[Trace]]) -> str:
    """The verdict lines of a Compare run (one per decoder against AR), then how the rounds ran."""
    ms = matchups(rounds)
    if not ms:
        return ""
    lines = ["**Verdict** (wall clock: seconds of decode after the prefill; forward clock: batched model calls)"]
    lines += ["- " + matchup_line(m) for m in ms]
    lines.append("")  # the note is a paragraph of its own, not part of the last item
    n = len(rounds)
    order = ", ".join(decoder_label(t.decoder) for t in rounds[0])
    if n == 1:
        lines.append(f"One round ({order}): its wall times carry no spread, so load on the machine can decide "
                     "the wall-clock verdict. More rounds show it.")
    else:
        lines.append(f"{n} rounds, interleaved (round 1: {order}; each later round starts one decoder on): "
                     "a range that spans 1x means load on the machine, not the decoder, decided it.")
    return "\n".join(lines)
