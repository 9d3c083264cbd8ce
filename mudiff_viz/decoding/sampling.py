"""Token sampling and the per-step quota: pure functions on batched tensors, no host sync."""

from __future__ import annotations

import torch


def quota_schedule(block_length: int, steps: int) -> list[int]:
    """Tokens to commit at each step of a block: ``block // steps``, the remainder to the first steps.

    With ``steps > block_length`` the later steps get 0 (as in the release's loop).
    """
    if block_length < 1 or steps < 1:
        raise ValueError("block_length and steps must be >= 1")
    base, rem = divmod(block_length, steps)
    return [base + (1 if i < rem else 0) for i in range(steps)]


class LogitsProcessor:
    """One transformation of a step's logits (b, ..., V) -> (b, ..., V), as transformers' ``LogitsProcessor``."""

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class Temperature(LogitsProcessor):
    def __init__(self, temperature: float) -> None:
        self.temperature = temperature

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        return logits / self.temperature


class TopK(LogitsProcessor):
    """Keep the k most likely tokens; the others become -inf."""

    def __init__(self, k: int) -> None:
        self.k = k

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        if not 0 < self.k < logits.shape[-1]:
            return logits
        kth = torch.topk(logits, self.k, dim=-1).values[..., -1:]
        return logits.masked_fill(logits < kth, float("-inf"))


class TopP(LogitsProcessor):
    """Keep the smallest set of tokens holding ``p`` of the probability (the token crossing p stays)."""

    def __init__(self, p: float) -> None:
        self.p = p

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        if not 0.0 < self.p < 1.0:
            return logits
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop_sorted = cum - sorted_logits.softmax(-1) >= self.p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        return logits.masked_fill(drop, float("-inf"))


class Sampler:
    """A guess and its confidence for every position, from a chain of logits processors.

    Deterministic mode (``temperature == 0``): argmax, with confidences from the temperature-1
    softmax of the filtered logits (temperature -> 0 would make every confidence 1 and collapse
    each block into one step). Otherwise x0 ~ softmax(processed logits) and the confidence is its
    probability there. Both decoders sample through one of these; a new knob that changes logits is
    one more processor here.
    """

    def __init__(self, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                 generator: torch.Generator | None = None, first: list[LogitsProcessor] = (),
                 dtype: torch.dtype = torch.float32) -> None:
        self.deterministic = temperature <= 0
        self.dtype = dtype  # the probabilities' dtype: float32, or the model's (numerics "release")
        self.processors: list[LogitsProcessor] = list(first)  # history processors (repetition.py) come first
        self.processors += [] if self.deterministic else [Temperature(temperature)]
        self.processors += [TopK(top_k), TopP(top_p)]  # each leaves the logits as they are when it is off
        self.generator = generator

    @classmethod
    def of(cls, params, generator: torch.Generator | None = None, first: list[LogitsProcessor] = (),
           dtype: torch.dtype = torch.float32) -> "Sampler":
        return cls(params.temperature, params.top_k, params.top_p, generator, first, dtype)

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        logits = logits.to(self.dtype)
        for process in self.processors:
            logits = process(logits)
        return logits.softmax(-1)

    def __call__(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(x0, confidence, probs) for logits (..., V)."""
        probs = self.probs(logits)
        if self.deterministic:
            x0 = probs.argmax(-1)
        else:
            flat = probs.reshape(-1, probs.shape[-1])
            x0 = torch.multinomial(flat, 1, generator=self.generator).reshape(probs.shape[:-1])
        conf = torch.gather(probs, -1, x0.unsqueeze(-1)).squeeze(-1)
        return x0, conf, probs


def probs_dtype(params, backend) -> torch.dtype:
    """The dtype a decode's probabilities (and so its confidences and threshold test) are computed
    in: the model's under numerics "release", as the release does (docs/real-models.md#bfloat16-numerics);
    float32 otherwise and for models without the knob."""
    if getattr(params, "numerics", "float32") == "release" and hasattr(backend, "numerics"):
        return backend.dtype
    return torch.float32
