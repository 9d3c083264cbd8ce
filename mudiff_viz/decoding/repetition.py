"""Repetition control for the AR loop: n-gram blocking and repetition, presence and frequency
penalties as logits processors that look at each row's tokens so far.

MinerU2.5's own client (mineru-vl-utils) never decodes plainly: its transformers path passes
``no_repeat_ngram_size=100`` (and ``repetition_penalty=1.0``) to ``generate``, its vLLM path adds
presence and frequency penalties per task. Without them a greedy loop can repeat a table row
until the token limit, which biases every AR-vs-diffusion comparison (docs/real-models.md#mineru25-as-shipped).

The rules follow the libraries whose results they must equal:

- ``repetition_penalty`` (transformers ``RepetitionPenaltyLogitsProcessor``): every token seen in
  the prompt or the answer has its logit divided by the penalty when positive, multiplied when
  negative (once, however often it was seen);
- ``presence_penalty`` / ``frequency_penalty`` (vLLM's, the OpenAI definition): over the answer's
  tokens only, ``logit -= presence * [count > 0] + frequency * count``;
- ``no_repeat_ngram_size`` n (transformers ``NoRepeatNGramLogitsProcessor``): a token that would
  complete an n-gram already present in prompt + answer is banned (-inf).

Applied in that order, before temperature and top-k/top-p (transformers applies its processors
before its warpers). The n-gram index grows by one entry per token, so a step costs O(n), not O(length).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from mudiff_viz.core.errors import UserInputError

RULE_SETS = ("auto", "off", "client-hf", "client-vllm", "custom")  # the ``repetition`` knob's choices


@dataclass(frozen=True)
class RepetitionRules:
    """One task's repetition settings (all off by default)."""

    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0

    @property
    def active(self) -> bool:
        return (self.no_repeat_ngram_size > 0 or self.repetition_penalty != 1.0 or self.presence_penalty != 0.0
                or self.frequency_penalty != 0.0)

    def to_dict(self) -> dict:
        return asdict(self)


OFF = RepetitionRules()


def rules_for(params, backend, tasks: list[str]) -> tuple[str, list[RepetitionRules]]:
    """The rule set the ``repetition`` knob names, resolved for this backend (``auto``: the model's
    client settings when it has some, else off) and each row's task; returns (set name, rules per row)."""
    name = getattr(params, "repetition", "auto")
    client = getattr(backend, "client_repetition", None) or {}
    if name == "auto":
        name = next(iter(client), "off")  # a backend lists its default client set first
    if name == "off":
        return name, [OFF] * len(tasks)
    if name == "custom":
        rules = RepetitionRules(int(params.no_repeat_ngram_size), float(params.repetition_penalty),
                                float(params.presence_penalty), float(params.frequency_penalty))
        return name, [rules] * len(tasks)
    if name not in client:
        raise UserInputError(f"{backend.name} has no {name} repetition settings; choose off or custom")
    by_task = client[name]
    return name, [RepetitionRules(**by_task.get(t, by_task.get("text", {}))) for t in tasks]


class TokenHistory:
    """Each row's prompt and answer ids, and which rows the next logits belong to (``alive``).

    The decoder loop calls :meth:`append` with the tokens it committed; the processors read the
    counts and the n-gram index."""

    def __init__(self, prompts: list[list[int]], rules: list[RepetitionRules], vocab: int, device) -> None:
        b = len(prompts)
        self.rules = rules
        self.alive = torch.arange(b, device=device)
        self.seq = [list(p) for p in prompts]
        self.seen = torch.zeros(b, vocab, dtype=torch.bool, device=device)  # prompt + answer
        self.counts = torch.zeros(b, vocab, device=device)  # answer only
        for r, p in enumerate(prompts):
            if p:
                self.seen[r, torch.tensor(p, device=device).clamp(0, vocab - 1)] = True
        self.ngrams: list[dict[tuple[int, ...], set[int]]] = [{} for _ in prompts]
        for r, rule in enumerate(rules):
            n = rule.no_repeat_ngram_size
            seq = self.seq[r]
            for end in range(n, len(seq) + 1) if n > 0 else ():
                self.ngrams[r].setdefault(tuple(seq[end - n : end - 1]), set()).add(seq[end - 1])

    def append(self, rows: list[int], tokens: list[int]) -> None:
        for r, t in zip(rows, tokens):
            seq = self.seq[r]
            seq.append(t)
            n = self.rules[r].no_repeat_ngram_size
            if n > 0 and len(seq) >= n:
                self.ngrams[r].setdefault(tuple(seq[len(seq) - n : -1]), set()).add(t)
        idx = torch.tensor(rows, device=self.seen.device)
        tok = torch.tensor(tokens, device=self.seen.device)
        self.seen[idx, tok] = True
        self.counts.index_put_((idx, tok), torch.ones(len(rows), device=self.counts.device), accumulate=True)

    def banned(self, row: int) -> set[int]:
        """Tokens that would complete an n-gram row ``row`` already holds."""
        n = self.rules[row].no_repeat_ngram_size
        seq = self.seq[row]
        if n <= 0 or len(seq) + 1 < n:
            return set()
        return self.ngrams[row].get(tuple(seq[len(seq) - n + 1 :]) if n > 1 else (), set())

    def _per_row(self, field: str, like: torch.Tensor) -> torch.Tensor:
        values = [getattr(self.rules[r], field) for r in self.alive.tolist()]
        return torch.tensor(values, dtype=like.dtype, device=like.device).view(-1, *([1] * (like.dim() - 1)))


class RepetitionProcessor:
    """All four rules on logits (b_alive, ..., V) of the rows ``history.alive``: the first link of the
    Sampler's chain (mudiff_viz/decoding/sampling.py)."""

    def __init__(self, history: TokenHistory) -> None:
        self.history = history

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        h = self.history
        alive = h.alive
        extra = [1] * (logits.dim() - 2)
        rules = [h.rules[r] for r in alive.tolist()]
        if any(r.repetition_penalty != 1.0 for r in rules):
            penalty = h._per_row("repetition_penalty", logits)
            seen = h.seen[alive].view(len(alive), *extra, -1)
            logits = torch.where(seen, torch.where(logits < 0, logits * penalty, logits / penalty), logits)
        if any(r.presence_penalty or r.frequency_penalty for r in rules):
            counts = h.counts[alive].view(len(alive), *extra, -1)
            logits = (logits - h._per_row("frequency_penalty", logits) * counts
                      - h._per_row("presence_penalty", logits) * (counts > 0).to(logits.dtype))
        if any(r.no_repeat_ngram_size > 0 for r in rules):
            logits = logits.clone()
            for i, r in enumerate(alive.tolist()):
                banned = h.banned(r)
                if banned:
                    logits[i, ..., sorted(banned)] = float("-inf")
        return logits
