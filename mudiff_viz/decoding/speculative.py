"""Draft and verify: a block-diffusion model drafts positions past the frontier, a verifier keeps
the longest prefix it agrees with plus one token of its own (docs/speculative.md).

Two decoders on the one run (clock, observers, stopping criteria, sampler) the others use:

- ``self-speculative``: one block-diffusion model is both drafter and verifier. With block size 1
  it is autoregressive (a MASK after the text, predicted from it), so verifying is asking its
  block-size-1 prediction at each drafted position. One forward does both jobs (the layout of
  models/base.py ``SpecLayout``, branched): ``[c ; d_0 .. d_{k-1} ; query_0 .. query_k ; B_0 .. B_k]``
  where ``c`` is the last committed token (not yet in the cache) and the ``d`` are the drafts,
  stored as a causal chain; query ``i`` is the block-size-1 MASK after ``c, d_0 .. d_{i-1}``; branch
  ``B_i`` is a diffusion block of ``draft_length`` masks continuing query ``i``, as if the query were
  its first mask. The verdict keeps ``d_0 .. d_{a-1}`` and the verifier's token at ``a``; the cache
  keeps ``c, d_0 .. d_{a-1}``; the next drafts are branch ``B_a``'s (drafted for exactly the text
  that was kept). With greedy decoding the tokens equal the model's
  ``--decoder diffusion --block-length 1``
  decode (tests/test_speculative.py).
- ``speculative``: the block-diffusion model drafts (storing the text it is behind on and drafting
  ``draft_length`` masks after it, one forward) and an AR model verifies the drafts in one causal
  forward (its logits at each draft). Greedy tokens equal the verifier's own greedy decode. Two
  models, two prefills, two forwards per cycle, all on the one clock.

Every forward of every model advances the clock and counts in ``nfe``; the trace's step records say
what each forward drafted and what each verdict was (core/trace.py ``VERDICTS``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from models.base import Speculator, SpecLayout, SpecLogits
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import ACCEPTED, BONUS, DISCARDED, DRAFTED, REJECTED, TOPK, Trace
from mudiff_viz.decoding.acceptance import Acceptance, Verdict
from mudiff_viz.decoding.observers import ProgressFn, Snapshot, SpecEvent
from mudiff_viz.decoding.run import DecodeRun, observers_for
from mudiff_viz.decoding.settings import SELF_SPEC, SPEC, DecodeParams


@dataclass
class Drafts:
    """The drafts of each row waiting for the next verify forward, at the positions right after the
    row's verified text (``base``)."""

    tokens: torch.Tensor  # (b, k)
    conf: torch.Tensor  # (b, k) each draft's probability under the distribution it came from
    q: torch.Tensor  # (b, k, V) that distribution (the speculative-sampling rule needs it)
    n: torch.Tensor | None = None  # (b,) drafts that exist per row, a prefix (None: all k); the rest is padding

    @classmethod
    def none(cls, b: int, vocab: int, device) -> "Drafts":
        return cls(torch.zeros(b, 0, dtype=torch.long, device=device), torch.zeros(b, 0, device=device),
                   torch.zeros(b, 0, vocab, device=device))

    def rows(self, keep: torch.Tensor) -> "Drafts":
        return Drafts(self.tokens[keep], self.conf[keep], self.q[keep], None if self.n is None else self.n[keep])

    @property
    def k(self) -> int:
        return self.tokens.shape[1]

    @property
    def count(self) -> torch.Tensor:
        """(b,) drafts per row."""
        if self.n is None:
            return torch.full((self.tokens.shape[0],), self.k, dtype=torch.long, device=self.tokens.device)
        return self.n

    @property
    def real(self) -> torch.Tensor:
        """(b, k) True where a draft exists."""
        return torch.arange(self.k, device=self.tokens.device)[None, :] < self.count[:, None]

    def only(self, rows: torch.Tensor) -> "Drafts":
        """These drafts for the rows where ``rows`` (b,) is True; none for the others (padding: a row
        with no drafts verifies nothing and drafts afresh, and its padding has zero probability)."""
        real = Drafts(self.tokens, self.conf, self.q, torch.where(rows, self.count, 0)).real
        return Drafts(self.tokens * real, self.conf * real, self.q * real[..., None], real.sum(-1))

    def cut(self, floor: float) -> "Drafts":
        """The drafts up to where the drafter's own odds of them all being right (the product of their
        confidences) fall below ``floor``, for the row that gets furthest (at least one draft, where a
        row has any): the later ones would widen the next forward for little. 0 keeps them all."""
        if floor <= 0 or not self.k:
            return self
        reach = (self.conf.cumprod(-1) >= floor).sum(-1)  # a row's padding has confidence 0
        k = max(int(bool(self.count.max())), int(reach.max()))
        return Drafts(self.tokens[:, :k], self.conf[:, :k], self.q[:, :k], None if self.n is None else self.n.clamp(max=k))

    def runner_ups(self) -> torch.Tensor:
        """(b, k) each position's likeliest token other than its draft: the guess for the verifier's
        correction there, should it reject the draft."""
        return self.q.scatter(-1, self.tokens[..., None], -1.0).argmax(-1)


def with_model_drafts(params: DecodeParams, drafter) -> DecodeParams:
    """``params`` with the draft knobs left to the model resolved: a draft length of 0 and draft
    branches ``auto`` become the drafter's own (``Backend.draft_length``, ``Backend.draft_branches``),
    so that the trace records what ran."""
    own = {}
    if not params.draft_length:
        own["draft_length"] = drafter.draft_length
    if params.draft_branches == "auto":
        own["draft_branches"] = drafter.draft_branches
    return replace(params, more={**params.more, **own}) if own else params


def pick_drafts(accept: Acceptance, logits: torch.Tensor) -> Drafts:
    """Drafts from a draft block's logits (b, w, V): argmax (or a draw) of the drafter's distribution."""
    q = accept.distribution(logits)
    tokens, conf = accept.pick(q)
    return Drafts(tokens, conf, q)


def top_k(probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    top = probs.topk(min(TOPK, probs.shape[-1]), dim=-1)
    return top.values, top.indices


class Cycle:
    """Bookkeeping shared by both decoders: per alive row, where its verified text ends (``base``), and
    the commit of a verdict: the tokens each row keeps (cut at a stop token and at ``max_new_tokens``),
    its step record, the counts and which rows go on."""

    def __init__(self, run: DecodeRun) -> None:
        self.run = run
        dev = run.backend.device
        self.rows = torch.arange(len(run.regions), device=dev)
        self.base = torch.zeros(len(run.regions), dtype=torch.long, device=dev)
        self.cycle = 0

    def settle(self, verdict: Verdict, drafts: Drafts, forward: int, role: str | None,
               following: Drafts | None = None) -> torch.Tensor:
        """Commit a verdict for the alive rows; record it (with ``following``, the drafts this same
        forward made for the next one); returns the (b,) rows that go on."""
        run, b, k = self.run, len(self.rows), drafts.k
        a = verdict.n_accepted
        i = torch.arange(k + 1, device=a.device)[None, :]
        count = drafts.count[:, None]
        exists = i <= count  # each real draft's verdict and the one after the last (a row's padding: none)
        padded = torch.where(i < count, torch.nn.functional.pad(drafts.tokens, (0, 1)), -1)  # draft at each
        tokens = torch.where(i < a[:, None], padded, torch.where(i == a[:, None], verdict.token[:, None], verdict.own))
        conf = torch.where(i < a[:, None], torch.cat([verdict.draft_conf, verdict.token_conf[:, None]], 1),
                           torch.where(i == a[:, None], verdict.token_conf[:, None], verdict.own_conf))
        # what each row may commit: up to and including a stop token, at most max_new_tokens in all
        generated = torch.tensor([run.states[r].n_generated for r in self.rows.tolist()], device=a.device)
        room = (run.params.max_new_tokens - generated).clamp(min=0)
        stop_at = torch.isin(tokens, run.stop_ids) & (i <= a[:, None])
        first_stop = torch.where(stop_at.any(1), stop_at.long().argmax(1) + 1, torch.full_like(a, k + 2))
        n_commit = torch.minimum(torch.minimum(a + 1, room), first_stop)
        committed = i < n_commit[:, None]
        verdicts = torch.where(i < a[:, None], ACCEPTED, torch.where(i == a[:, None], REJECTED, DISCARDED))
        verdicts = torch.where((i == a[:, None]) & (a[:, None] == k), BONUS, verdicts)
        verdicts = torch.where(committed | (verdicts == DISCARDED), verdicts, DISCARDED)  # past a stop or the limit
        goes_on = (n_commit == a + 1) & (first_stop > a + 1) & (room > a + 1)
        top_p, top_i = top_k(verdict.probs)
        parts = [dict(positions=self.base[:, None] + i, valid=exists, candidates=tokens,
                      confidences=conf, committed=committed, verdicts=verdicts, drafts=padded, top_p=top_p, top_i=top_i)]
        if following is not None:
            parts.append(self.draft_entries(following, self.base + a + 1, goes_on))
        run.step(SpecEvent(self.rows, **{key: torch.cat([p[key] for p in parts], 1) for key in parts[0]},
                           forward=forward, block=self.cycle, role=role))
        host = zip(self.rows.tolist(), tokens.tolist(), conf.tolist(), n_commit.tolist(), goes_on.tolist())
        for r, toks, confs, n, on in host:
            run.states[r].extend(toks[:n], [forward] * n, confs[:n])
            run.states[r].stopped = not on
        run.count_speculation(verify_forwards=b, drafted=int(count.sum()), accepted=int(a.sum()))
        self.base = self.base + a + 1
        return goes_on

    def record_drafts(self, drafts: Drafts, forward: int) -> None:
        """A forward that only drafted (the speculative decoder's drafter)."""
        entries = self.draft_entries(drafts, self.base, torch.ones_like(self.rows, dtype=torch.bool))
        self.run.step(SpecEvent(self.rows, **entries, forward=forward, block=self.cycle))

    def draft_entries(self, drafts: Drafts, start: torch.Tensor, alive: torch.Tensor) -> dict:
        w = drafts.k
        j = torch.arange(w, device=start.device)[None, :]
        top_p, top_i = top_k(drafts.q)
        none = torch.full_like(drafts.tokens, -1)
        return dict(positions=start[:, None] + j, valid=alive[:, None] & drafts.real, candidates=drafts.tokens,
                    confidences=drafts.conf, committed=torch.zeros_like(drafts.tokens, dtype=torch.bool),
                    verdicts=torch.full_like(drafts.tokens, DRAFTED), drafts=none, top_p=top_p, top_i=top_i)

    def tick(self, n_rows: int) -> int:
        """One forward of ``n_rows`` rows is done: its clock index."""
        run = self.run
        forward = run.forward
        run.advance(seq_forwards=n_rows, batched_forwards=1, times=[run.clock.now()])
        return forward

    def keep_rows(self, goes_on: torch.Tensor) -> None:
        self.rows, self.base = self.rows[goes_on], self.base[goes_on]
        self.cycle += 1
        done = max((s.n_generated for s in self.run.states), default=0)
        self.run.block_done(done, self.run.params.max_new_tokens)

    def over(self) -> bool:
        """No row left, or a halt criterion fires (rows stop at their own token limit in ``settle``)."""
        if self.rows.numel() == 0:
            return True
        return self.run.halt(min(self.run.states[r].n_generated for r in self.rows.tolist()))


def branch_of(draft_logits: torch.Tensor, n_accepted: torch.Tensor, n_queries: int) -> torch.Tensor:
    """The draft logits (b, w, V) of the branch that follows each row's verdict: the block drafted
    after the query the verifier stopped at (models/base.py SpecLayout, ``branched``)."""
    b = draft_logits.shape[0]
    per_branch = draft_logits.view(b, n_queries, -1, draft_logits.shape[-1])
    return per_branch[torch.arange(b, device=draft_logits.device), n_accepted]


def following_branch(out: SpecLogits, layout: SpecLayout, verdict: Verdict) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits (b, w, V) to draft the next drafts from, and (b,) whether they are an anchored
    branch's: where the verifier stopped at a query whose anchor (the draft's runner-up) is the
    token it gave, the block drafted after that token; elsewhere the block of masks after the query."""
    a = verdict.n_accepted
    logits = branch_of(out.draft, a, layout.n_queries)
    m = layout.n_anchored
    if not m:
        return logits, torch.zeros_like(a, dtype=torch.bool)
    at = a.clamp(max=m - 1)
    hit = (a < m) & (layout.anchors.gather(1, at[:, None])[:, 0] == verdict.token)
    anchored = branch_of(out.anchored, at, m)
    return torch.where(hit[:, None, None], anchored, logits), hit


@torch.inference_mode()
def decode_self_speculative(backend: Speculator, page, regions, params: DecodeParams,
                            progress: ProgressFn | None = None, snapshot: Snapshot | None = None) -> Trace:
    """One block-diffusion model drafts and verifies itself; the tokens are its block-length-1 decode's."""
    params.check()
    if backend.mask_id is None or not isinstance(backend, Speculator):
        raise UserInputError(f"{backend.name} cannot draft: the self-speculative decoder needs a block-diffusion model")
    params = with_model_drafts(params, backend)
    run = DecodeRun(SELF_SPEC, backend, page, regions, params, observers_for(progress, snapshot))
    ctx = run.ctx = run.encode(backend, block_length=1)  # the reference: the block-length-1 decode
    run.prefill_done()
    run.extra_params["prefill_block"] = 1 if backend.prefill_follows_block_length else None
    accept = Acceptance(params, run.generator, backend.mask_id)
    w, cyc = params.draft_length, Cycle(run)
    runner_ups = params.draft_branches == "runner-up"
    last_only = params.draft_branches == "last"  # one block, after the last draft: [bonus position ; w drafts]
    drafts = pending = None
    while not cyc.over():
        b = len(cyc.rows)
        if pending is None:
            clean, queries_from, anchors = torch.zeros(b, 0, dtype=torch.long, device=backend.device), 0, None
            n_clean = torch.zeros(b, dtype=torch.long, device=backend.device)
        else:
            clean, queries_from = torch.cat([pending[:, None], drafts.tokens], 1), 1
            n_clean = drafts.count + 1
            anchors = drafts.runner_ups() if runner_ups and drafts.k else None
        layout = SpecLayout(clean, n_clean, queries_from, w + last_only, branched=not last_only, anchors=anchors)
        out = backend.spec_forward(ctx, cyc.rows, layout)
        if drafts is None:
            drafts = Drafts.none(b, out.verify.shape[-1], backend.device)
        verdict = accept(drafts.tokens, drafts.conf, drafts.q, out.verify, drafts.real)
        backend.keep(ctx, cyc.rows, verdict.n_accepted + queries_from)
        if last_only:  # drafted after every draft: good only where the verifier kept them all
            logits, anchored = out.draft[:, 1:], torch.zeros_like(verdict.n_accepted, dtype=torch.bool)
            following = pick_drafts(accept, logits).only(verdict.n_accepted == drafts.count).cut(params.draft_floor)
        else:
            logits, anchored = following_branch(out, layout, verdict)
            following = pick_drafts(accept, logits).cut(params.draft_floor)
        forward = cyc.tick(b)
        run.count_speculation(draft_forwards=b, anchor_hits=int(anchored.sum()))
        goes_on = cyc.settle(verdict, drafts, forward, None, following)
        pending, drafts = verdict.token[goes_on], following.rows(goes_on)
        cyc.keep_rows(goes_on)
    return run.finish()


@torch.inference_mode()
def decode_speculative(backend: Speculator, page, regions, params: DecodeParams, progress: ProgressFn | None = None,
                       snapshot: Snapshot | None = None, verifier=None) -> Trace:
    """``backend`` (block diffusion) drafts, ``verifier`` (AR) verifies; the tokens are the verifier's greedy decode's."""
    params.check()
    if verifier is None or backend.mask_id is None or not isinstance(backend, Speculator):
        raise UserInputError("the speculative decoder needs a block-diffusion drafter and an AR verifier")
    if not isinstance(verifier, Speculator):
        raise UserInputError(f"{verifier.name} cannot verify drafts")
    params = with_model_drafts(params, backend)
    run = DecodeRun(SPEC, backend, page, regions, params, observers_for(progress, snapshot), verifier=verifier)
    dctx = run.ctx = run.encode(backend, block_length=params.block_length)
    vctx = run.encode(verifier)
    first = verifier.first_logits(vctx)  # the verifier's prefill gives the first token, as in its AR decode
    run.prefill_done()
    run.extra_params["prefill_block"] = params.block_length if backend.prefill_follows_block_length else None
    accept = Acceptance(params, run.generator, verifier.mask_id)
    draft_rule = Acceptance(params, run.generator, backend.mask_id)
    w, cyc, dev = params.draft_length, Cycle(run), backend.device
    b = len(regions)
    empty = Drafts.none(b, first.shape[-1], dev)
    verdict = accept(empty.tokens, empty.conf, empty.q, first[:, None])
    goes_on = cyc.settle(verdict, empty, cyc.tick(b), "verifier")
    pending = verdict.token[goes_on]
    behind, n_behind = pending[:, None], torch.ones_like(pending)  # committed text the drafter has not stored
    cyc.keep_rows(goes_on)
    while not cyc.over():
        b = len(cyc.rows)
        # the drafter stores what it is behind on and drafts after it
        out = backend.spec_forward(dctx, cyc.rows, SpecLayout(behind, n_behind, behind.shape[1] + 1, w))
        backend.keep(dctx, cyc.rows, n_behind)
        drafts = pick_drafts(draft_rule, out.draft).cut(params.draft_floor)
        cyc.record_drafts(drafts, cyc.tick(b))
        run.count_speculation(draft_forwards=b)
        # the verifier checks them in one causal forward after the last committed token
        clean = torch.cat([pending[:, None], drafts.tokens], 1)
        vout = verifier.spec_forward(vctx, cyc.rows, SpecLayout(clean, torch.full((b,), drafts.k + 1, device=dev), 1, 0))
        verdict = accept(drafts.tokens, drafts.conf, drafts.q, vout.verify)
        verifier.keep(vctx, cyc.rows, verdict.n_accepted + 1)
        goes_on = cyc.settle(verdict, drafts, cyc.tick(b), "verifier")
        a = verdict.n_accepted
        j = torch.arange(drafts.k + 1, device=dev)[None, :]
        behind = torch.where(j < a[:, None], torch.cat([drafts.tokens, verdict.token[:, None]], 1), verdict.token[:, None])
        behind, n_behind, pending = behind[goes_on], (a + 1)[goes_on], verdict.token[goes_on]
        cyc.keep_rows(goes_on)
    return run.finish()
