"""When a decode stops: criteria both decoders ask, as transformers' ``StoppingCriteria``.

Two kinds. A *row* criterion looks at the tokens a row just committed (a diffusion block, or one AR
token) and says which rows are done. A *halt* criterion looks at the whole run before the next unit
of work (a block, or the next AR token) and gives a reason to end it all, or None. A new stopping
rule is one class here, added in :func:`stopping_for`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Halt:
    reason: str
    truncated: bool  # the decode was cut short (recorded as ``metrics.truncated``), not finished


class StopOnIds:
    """A row is done once it commits a stop token (checked per block for diffusion: filler after
    the stop token is cut when the trace is built)."""

    def __init__(self, stop_ids: torch.Tensor) -> None:
        self.stop_ids = stop_ids

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        """(b, n) tokens just committed -> (b,) bool: rows that stopped."""
        return torch.isin(tokens, self.stop_ids).any(-1)


class MaxNewTokens:
    def __init__(self, limit: int) -> None:
        self.limit = limit

    def __call__(self, generated: int, elapsed_s: float) -> Halt | None:
        return Halt(f"{self.limit} new tokens", truncated=False) if generated >= self.limit else None


class TimeLimit:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, generated: int, elapsed_s: float) -> Halt | None:
        return Halt(f"time limit of {self.seconds:.0f} s", truncated=True) if elapsed_s > self.seconds else None


@dataclass
class Stopping:
    rows: list  # row criteria: (tokens) -> (b,) bool
    halts: list  # halt criteria: (generated, elapsed_s) -> Halt | None

    def finished_rows(self, tokens: torch.Tensor) -> torch.Tensor:
        done = torch.zeros(tokens.shape[0], dtype=torch.bool, device=tokens.device)
        for criterion in self.rows:
            done |= criterion(tokens)
        return done

    def halt(self, generated: int, elapsed_s: float) -> Halt | None:
        """The first halt criterion that fires before the next unit of work, if any."""
        return next((h for c in self.halts if (h := c(generated, elapsed_s)) is not None), None)


def stopping_for(params, stop_ids: torch.Tensor) -> Stopping:
    """The criteria of one decode: stop tokens, ``max_new_tokens`` and the wall-time budget."""
    halts: list = [MaxNewTokens(params.max_new_tokens)]
    if params.max_seconds is not None:
        halts.append(TimeLimit(params.max_seconds))
    return Stopping(rows=[StopOnIds(stop_ids)], halts=halts)
