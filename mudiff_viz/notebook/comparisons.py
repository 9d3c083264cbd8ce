"""What ``mv.compare`` and ``mv.shuffle`` return: several traces of one page, with the tables the
app's Compare and Shuffle tabs show, displayed as one player on a shared clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from mudiff_viz.core.trace import Trace
from mudiff_viz.views import tables
from mudiff_viz.views.verdict import verdict_markdown


@dataclass
class Comparison:
    """AR, diffusion and any draft-and-verify decoders on one page, played on one clock (the app's
    Compare tab). ``also``: the further decoders' traces, by decoder name."""

    ar: Trace
    diffusion: Trace
    also: dict[str, Trace] = field(default_factory=dict)
    rounds: list[list[Trace]] = field(default_factory=list)  # every round's traces (the last is the above)

    @property
    def traces(self) -> list[Trace]:
        return [self.ar, self.diffusion, *self.also.values()]

    def __getitem__(self, decoder: str) -> Trace:
        """One decoder's trace (``cmp["self-speculative"]``)."""
        for t in self.traces:
            if t.decoder == decoder:
                return t
        raise KeyError(f"{decoder!r} is not in this comparison: {', '.join(t.decoder for t in self.traces)}")

    def verdict(self) -> str:
        """The Compare tab's verdict (markdown): who won on wall time, with the spread over the
        rounds, and on forwards, and what one forward costs in AR forwards."""
        return verdict_markdown(self.rounds or [self.traces])

    def metrics_frame(self) -> pd.DataFrame:
        """The Compare tab's metrics table: one row per metric, one column per decoder."""
        headers, rows = tables.metrics_table(self.traces)
        return pd.DataFrame(rows, columns=headers).set_index("metric")

    def tokens_frame(self) -> pd.DataFrame:
        """Both traces' token rows (the ``decoder`` column tells them apart)."""
        return pd.concat([t.tokens_frame() for t in self.traces], ignore_index=True)

    def player(self, **kwargs: Any):
        from mudiff_viz.notebook.widget import Player

        return Player(self, **kwargs)

    def _repr_mimebundle_(self, include=None, exclude=None):
        from mudiff_viz.notebook.widget import mimebundle

        return mimebundle(self)


@dataclass
class ShuffleComparison:
    """One page against its word-shuffled copy, each through both decoders (the Shuffle tab).

    ``traces`` and ``scores`` are keyed (decoder, column), column "original" (the level-0 control)
    or "shuffled"; a score is CER, error tokens and confidently wrong tokens against that page's
    own ground truth (None without one)."""

    level: float
    seed: int
    traces: dict[tuple[str, str], Trace]
    scores: dict[tuple[str, str], dict | None]
    lines_changed: int
    lines_total: int

    def scores_frame(self) -> pd.DataFrame:
        rows = [{"decoder": d, "page": c, **(score or {})} for (d, c), score in self.scores.items()]
        return pd.DataFrame(rows).set_index(["decoder", "page"])

    def player(self, **kwargs: Any):
        from mudiff_viz.notebook.widget import Player

        return Player(self, **kwargs)

    def _repr_mimebundle_(self, include=None, exclude=None):
        from mudiff_viz.notebook.widget import mimebundle

        return mimebundle(self)
