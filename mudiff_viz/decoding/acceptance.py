"""Which drafts a verifier keeps: the pure verdict of one verify forward (no model, no loop), as the
diffusion scheduler is the pure step of a denoising forward.

Drafts ``d_0 .. d_{k-1}`` sit at the positions after the verified text; the verifier gave, in one
forward, its distribution ``p_i`` for position ``i`` given the text plus ``d_0 .. d_{i-1}``
(``p_k``: after all of them). The rule keeps the longest prefix of drafts it accepts, then adds one
token of its own at the first position it did not accept (the *correction*), or after the last
draft when it accepted them all (the *bonus*): every verify forward commits at least one token.

- Deterministic mode (temperature 0), ``exact``: accept ``d_i`` while it is the verifier's argmax.
  The tokens equal the verifier's own greedy one-token-at-a-time decode, whatever the drafts were.
- Sampling (temperature > 0), ``exact``: the standard speculative-sampling rule. ``d_i`` was drawn
  from the draft distribution ``q_i``; keep it with probability ``min(1, p_i(d_i) / q_i(d_i))``; at
  the first rejection draw the correction from ``max(0, p_i - q_i)`` normalised. Each committed token
  is then distributed as ``p_i``: the output is distributed as the verifier's own sampled decode
  (tests/test_speculative_sampling.py checks it by a chi-square test).
- ``confidence`` (lossy, for exploration): also keep a draft whose own confidence (``q_i(d_i)``) is at
  least ``accept_threshold``, whatever the verifier says; later positions are then verified after it.

The verifier's distribution is the Sampler's (temperature, top-k, top-p), with a diffusion model's
MASK token removed and the rest renormalised: its one-token decode never commits MASK either (the
step limit force-commits the best real token).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mudiff_viz.decoding.sampling import Sampler


@dataclass
class Verdict:
    n_accepted: torch.Tensor  # (b,) drafts kept, a prefix
    token: torch.Tensor  # (b,) the verifier's token at position n_accepted (correction or bonus)
    token_conf: torch.Tensor  # (b,) its probability under the verifier
    draft_conf: torch.Tensor  # (b, k) the verifier's probability of each draft
    own: torch.Tensor  # (b, k + 1) the verifier's own pick at each position (argmax, or a draw from p_i)
    own_conf: torch.Tensor  # (b, k + 1) its probability
    probs: torch.Tensor  # (b, k + 1, V) the verifier's distributions


class Acceptance:
    """The verdict rule of one decode (its knobs: temperature, top-k, top-p, acceptance, accept_threshold)."""

    def __init__(self, params, generator: torch.Generator | None, mask_id: int | None) -> None:
        self.sampler = Sampler.of(params, generator)
        self.generator = generator
        self.mask_id = mask_id
        self.lossy = params.acceptance == "confidence"
        self.threshold = params.accept_threshold

    @property
    def deterministic(self) -> bool:
        return self.sampler.deterministic

    def distribution(self, logits: torch.Tensor) -> torch.Tensor:
        """The Sampler's probabilities of ``logits`` (..., V), MASK removed and renormalised."""
        probs = self.sampler.probs(logits)
        if self.mask_id is not None:
            probs = probs.clone()
            probs[..., self.mask_id] = 0.0
            probs = probs / probs.sum(-1, keepdim=True).clamp_min(1e-30)
        return probs

    def pick(self, probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A token per position of ``probs`` (..., V): the argmax, or a draw; and its probability."""
        if self.deterministic:
            tok = probs.argmax(-1)
        else:
            flat = probs.reshape(-1, probs.shape[-1])
            tok = torch.multinomial(flat, 1, generator=self.generator).reshape(probs.shape[:-1])
        return tok, probs.gather(-1, tok[..., None])[..., 0]

    def __call__(self, drafts: torch.Tensor, draft_q: torch.Tensor, q: torch.Tensor | None,
                 verify_logits: torch.Tensor, real: torch.Tensor | None = None) -> Verdict:
        """``drafts`` (b, k) with their draft probabilities ``draft_q`` (b, k) and, when sampling, the
        draft distributions ``q`` (b, k, V); ``verify_logits`` (b, k + 1, V). ``real`` (b, k): where a
        draft exists (a prefix per row; None: everywhere); a row's padding is never kept, and its
        zero ``q`` makes the token drawn there the verifier's own."""
        probs = self.distribution(verify_logits)
        b, k = drafts.shape
        own, own_conf = self.pick(probs)
        p_draft = probs[:, :k].gather(-1, drafts[..., None])[..., 0]
        if self.deterministic:
            keep = own[:, :k] == drafts
        else:
            u = torch.rand(drafts.shape, generator=self.generator, device=drafts.device)
            keep = u * draft_q < p_draft  # u < p / q, without dividing by a zero q
        if self.lossy:
            keep = keep | (draft_q >= self.threshold)
        if real is not None:
            keep = keep & real
        n_acc = keep.long().cumprod(-1).sum(-1)
        at = n_acc[:, None]
        token = own.gather(1, at)[:, 0]
        if not self.deterministic and k:
            rejected = n_acc < k  # the correction comes from the residual max(0, p - q)
            p_at = probs.gather(1, at[..., None].expand(b, 1, probs.shape[-1]))[:, 0]
            q_at = q.gather(1, at.clamp(max=k - 1)[..., None].expand(b, 1, q.shape[-1]))[:, 0]
            residual = (p_at - q_at).clamp_min(0.0)
            mass = residual.sum(-1, keepdim=True)
            residual = torch.where(mass > 0, residual / mass.clamp_min(1e-30), p_at)
            drawn = torch.multinomial(residual, 1, generator=self.generator)[:, 0]
            token = torch.where(rejected, drawn, token)
        token_conf = probs.gather(1, at[..., None].expand(b, 1, probs.shape[-1]))[:, 0].gather(-1, token[:, None])[:, 0]
        return Verdict(n_acc, token, token_conf, p_draft, own, own_conf, probs)
