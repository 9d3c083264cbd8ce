"""Training objectives of the nano twins: the attention masks, the positions and the losses.

AR: [prompt ; answer] with a causal answer, next-token loss.
Diffusion (SDAR / block diffusion): [prompt ; clean answer ; noisy answer], with the four rules

    clean -> clean   block-causal (block(k) <= block(q))
    noisy -> clean   strictly earlier blocks
    noisy -> noisy   same block only
    clean -> noisy   never

and cross-entropy on the masked positions. The prompt is visible to all and sees only itself.
Positions (model.walk): clean tokens sit on their own last character, exactly as committed text
does at inference; a noisy block starts from the exact end of the clean text before it and
counts ``chars_per_token`` for each masked token, as a block being denoised does at inference.
Both twins add the CTC loss on the vision encoder.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from models.nano.anchor import anchored_walk
from models.nano.model import CharTables, NanoOCR, Visual, answer_position, greedy_ctc_paths, masked_runs, walk
from models.nano.tokenizer import CharTokenizer, SubwordTokenizer

PROMPT, CLEAN, NOISY = 0, 1, 2
CHARS = CharTokenizer()


def segment_mask(kind: torch.Tensor, block: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Boolean attention mask (B, 1, T, T) from per-position segment kind, block index and validity."""
    qk, kk = kind[:, :, None], kind[:, None, :]
    qb, kb = block[:, :, None], block[:, None, :]
    allow = (kk == PROMPT).expand(-1, kind.shape[1], -1).clone()  # the prompt is visible to all, sees only itself
    allow |= (qk == CLEAN) & (kk == CLEAN) & (kb <= qb)
    allow |= (qk == NOISY) & (kk == CLEAN) & (kb < qb)
    allow |= (qk == NOISY) & (kk == NOISY) & (kb == qb)
    allow &= valid[:, None, :]
    eye = torch.eye(kind.shape[1], dtype=torch.bool, device=kind.device)[None]
    return (allow | eye)[:, None]


def encode_batch(model: NanoOCR, batch) -> Visual:
    """The batch's visual tokens. A batch that carries its collated ``images`` and ``widths`` (a
    ``gpu_data.RegionBatch``, already on the model's device) is encoded as it is; otherwise its
    numpy line images are collated here (``preprocess`` needs PIL: imported only then)."""
    if hasattr(batch, "images"):
        return model.encode(batch.images, batch.widths, [len(r.lines) for r in batch])
    from models.nano.preprocess import collate

    images, widths = collate([p for r in batch for p in r.lines], multiple=64)
    return model.encode(images, widths, [len(r.lines) for r in batch])


def ctc_loss(model: NanoOCR, v: Visual, batch) -> torch.Tensor:
    targets = [CHARS.encode(t) for r in batch for t in r.line_texts]
    logp = model.ctc_head(v.enc).float().log_softmax(-1).transpose(0, 1)  # T, B, V
    flat = torch.tensor([t for seq in targets for t in seq], dtype=torch.long)
    lens = torch.tensor([len(seq) for seq in targets], dtype=torch.long)
    return F.ctc_loss(logp, flat, v.enc_len, lens, blank=CHARS.pad_id, zero_infinity=True)


def pad_ids(seqs: list[list[int]], value: int) -> torch.Tensor:
    n = max(len(s) for s in seqs)
    return torch.tensor([s + [value] * (n - len(s)) for s in seqs], dtype=torch.long)


@dataclass
class Anchoring:
    """Glyph anchoring of the training positions (models/nano/anchor.py): the decoders move the
    reading column onto the CTC head's reading of the line after every commit, so a twin trained on
    counted columns meets other positions wherever the CTC reading and the true text differ (a
    doubled glyph read once, a dropped character). With this, training walks the same way."""

    reach: int
    lines: list[list[str]]  # per row, per line: the CTC head's greedy reading
    pieces: list[str]
    rows: tuple[list, list, list]  # the tokenizer's char tables as lists: length, newlines, tail

    @staticmethod
    def of(model: NanoOCR, tok: SubwordTokenizer, v: Visual, batch, reach: int) -> "Anchoring | None":
        """The anchoring of a batch (None for ``reach`` 0: counted columns)."""
        if reach <= 0:
            return None
        with torch.no_grad():
            paths = greedy_ctc_paths(model.ctc_head(v.enc), v.enc_len, CHARS.pad_id)
        lines, first = [], 0
        for r in batch:
            lines.append(["".join(CHARS.token_text(t) for t, _ in p) for p in paths[first : first + len(r.lines)]])
            first += len(r.lines)
        return Anchoring(reach, lines, tok.pieces, tuple(a.tolist() for a in tok.char_tables))

    def walk(self, ids: torch.Tensor, known: torch.Tensor, every: int = 1):
        """:func:`models.nano.model.walk` from the start of each row, anchored after every ``every``-th
        token as a decode that commits that many at a time anchors: (line_before, col_before,
        line_after, col_after), each (B, L)."""
        before_l, before_c, after_l, after_c = [], [], [], []
        for row, ok, lines in zip(ids.tolist(), known.tolist(), self.lines):
            line, counted, anchored = anchored_walk(0, 0.0, "", row, ok, self.pieces, *self.rows, lines, self.reach, every)
            after_l.append(line)
            after_c.append(counted)
            before_l.append([0] + line[:-1])
            before_c.append([0.0] + anchored[:-1])
        return tuple(torch.tensor(x, dtype=torch.float32, device=ids.device) for x in (before_l, before_c, after_l, after_c))


def ar_loss(model: NanoOCR, tok: SubwordTokenizer, tables: CharTables, batch, ctc_weight: float = 0.5,
            anchor_reach: int = 0):
    v = encode_batch(model, batch)
    ids = [tok.encode(r.text) for r in batch]
    targets = pad_ids([s + [tok.eos_id] for s in ids], tok.pad_id)  # t1..tn, eos
    logits = ar_logits(model, tok, tables, v, pad_ids(ids, tok.pad_id), Anchoring.of(model, tok, v, batch, anchor_reach))
    flat_t = targets.reshape(-1)
    main = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), flat_t, ignore_index=tok.pad_id)
    with torch.no_grad():
        keep = flat_t != tok.pad_id
        acc = (logits.reshape(-1, logits.shape[-1]).argmax(-1)[keep] == flat_t[keep]).float().mean()
    ctc = ctc_loss(model, v, batch)
    return main + ctc_weight * ctc, {"ce": main.item(), "acc": acc.item(), "ctc": ctc.item()}


def ar_logits(model: NanoOCR, tok: SubwordTokenizer, tables: CharTables, v: Visual, inputs: torch.Tensor,
              anchoring: Anchoring | None = None) -> torch.Tensor:
    """The AR twin's causal forward over ``[prompt ; t1..tn]`` (``inputs`` padded with ``pad_id``):
    logits (B, n + 1, V), row i predicting token i + 1 (the last one the stop token)."""
    b, p = v.vis_mask.shape
    n = inputs.shape[1]
    real = inputs != tok.pad_id
    zero = torch.zeros(b)
    if anchoring is None:
        _, _, line, col = walk(zero, zero, inputs, real, tables, model.cfg.chars_per_token)
    else:
        _, _, line, col = anchoring.walk(inputs, real)
    positions = torch.cat([model.prompt_positions(v), answer_position(v.line_starts, line, col)], 1)
    x = torch.cat([model.prompt_embeddings(v, tok.image_pad_id, tok.bos_id), model.embed(inputs)], 1)
    kind = torch.cat([torch.full((b, p + 1), PROMPT), torch.full((b, n), CLEAN)], 1)
    block = torch.cat([torch.full((b, p + 1), -1), torch.arange(n).expand(b, n)], 1)
    valid = torch.cat([v.vis_mask, torch.ones(b, 1, dtype=torch.bool), real], 1)
    hidden, _ = model.run_layers(x, positions, segment_mask(kind, block, valid))
    return model.logits(hidden[:, p:])  # predictions from <|im_start|>, t1..tn


def draw_mask(real: torch.Tensor, block_size: int, generator: torch.Generator, eps: float = 1e-3,
              suffix_share: float = 0.0) -> torch.Tensor:
    """Which answer tokens to mask (B, N), N a multiple of ``block_size``; ``real`` marks non-padding.

    A row is masked uniformly (t ~ U(0,1), each token with p = (1-eps)t + eps, SDAR's schedule) or,
    with probability ``suffix_share``, as a left-to-right decode leaves its blocks: each block keeps a
    clean prefix of random length (0 .. block_size-1) and masks the rest. At least one token per row.
    """
    b, n = real.shape
    t = torch.rand(b, 1, generator=generator)
    prob = (1 - eps) * t + eps
    masked = torch.rand(b, n, generator=generator) < prob
    if suffix_share > 0:
        in_block = torch.arange(n) % block_size
        cut = torch.randint(0, block_size, (b, n // block_size), generator=generator).repeat_interleave(block_size, 1)
        suffix = torch.rand(b, 1, generator=generator) < suffix_share
        masked = torch.where(suffix, in_block[None] >= cut, masked)
    masked &= real
    none = ~masked.any(1)
    if none.any():
        first = torch.argmax(real.float() * torch.rand(b, n, generator=generator), dim=1)
        masked[none, first[none]] = True
    return masked


def masked_run_length(masked: torch.Tensor, block_size: int) -> torch.Tensor:
    """For each masked position, how many masked tokens sit between it and the last clean token (or
    block start) before it in its block: 0 for the token right after committed text, 1 for the one
    after that, ... (0 at clean positions; :func:`models.nano.model.masked_runs` per block).

    A block being decoded commits next to its clean context first, so this is how far ahead a
    masked token has to read."""
    b, n = masked.shape
    return masked_runs(masked.reshape(b * n // block_size, block_size)).view(b, n)


def block_answers(tok: SubwordTokenizer, batch, block_size: int) -> torch.Tensor:
    """(B, N) answer ids of a batch of regions as a block decoder fills them (:func:`block_ids`)."""
    return block_ids(tok, [r.text for r in batch], block_size)


def block_ids(tok: SubwordTokenizer | CharTokenizer, texts: list[str], block_size: int) -> torch.Tensor:
    """(B, N) answer ids as a block decoder fills them: the text, the stop token (``eos_id``), then
    the stop token up to the end of that block; rows padded with ``pad_id`` to a common multiple of
    ``block_size``. Both pairs' tokenizers (the character pair's stop token is ``<eos>``)."""
    answers = []
    for s in (tok.encode(t) for t in texts):
        n_full = -(-(len(s) + 1) // block_size) * block_size
        answers.append(s + [tok.eos_id] * (n_full - len(s)))
    return pad_ids(answers, tok.pad_id)


def answer_positions(model: NanoOCR, tok: SubwordTokenizer, tables: CharTables, v: Visual, clean: torch.Tensor,
                     masked: torch.Tensor, block_size: int, shown: torch.Tensor | None = None,
                     anchoring: Anchoring | None = None):
    """Rotary positions (B, N) of the clean answer copy and of the noisy copy, and the noisy ids.
    Clean tokens sit on their last character; each noisy block starts where the clean text before it
    ends and counts ``chars_per_token`` per masked token, as a block being denoised does at inference;
    with ``anchoring``, where the clean text before it ends after anchoring at every block's end."""
    b, n = clean.shape
    real = clean != tok.pad_id
    noisy = torch.where(masked, torch.full_like(clean, tok.mask_id), clean if shown is None else shown)
    c = model.cfg.chars_per_token
    zero = torch.zeros(b)
    if anchoring is None:
        line_b, col_b, line_a, col_a = walk(zero, zero, clean, real, tables, c)
    else:
        line_b, col_b, line_a, col_a = anchoring.walk(clean, real, block_size)
    clean_pos = answer_position(v.line_starts, line_a, col_a)
    nb = n // block_size
    starts = torch.arange(nb) * block_size
    nl_b, nc_b, _, _ = walk(
        line_b[:, starts].reshape(-1), col_b[:, starts].reshape(-1),
        noisy.view(b * nb, block_size), (real & ~masked).view(b * nb, block_size), tables, c,
    )
    noisy_pos = answer_position(v.line_starts.repeat_interleave(nb, 0), nl_b, nc_b).view(b, n)
    return clean_pos, noisy_pos, noisy


def true_start_positions(tok: SubwordTokenizer, tables: CharTables, v: Visual, clean: torch.Tensor) -> torch.Tensor:
    """(B, N) where each answer token would sit in a noisy block if every token before it were known:
    what :func:`answer_positions` estimates for a masked token (for measuring, never a model input)."""
    zero = torch.zeros(clean.shape[0])
    line_b, col_b, _, _ = walk(zero, zero, clean, clean != tok.pad_id, tables, 0.0)
    return answer_position(v.line_starts, line_b, col_b)


def denoise_logits(model: NanoOCR, tok: SubwordTokenizer, tables: CharTables, v: Visual, clean: torch.Tensor,
                   masked: torch.Tensor, block_size: int, shown: torch.Tensor | None = None,
                   anchoring: Anchoring | None = None) -> torch.Tensor:
    """One SDAR training forward over ``[prompt ; clean answer ; noisy answer]``: the logits (B, N, V)
    at the noisy copy, whose ``masked`` tokens are <|MASK|> (positions: :func:`answer_positions`).
    ``shown`` (B, N): the ids the noisy copy shows at unmasked positions (default ``clean``; the
    model's own guesses with :func:`commit_own_guesses`)."""
    b, p = v.vis_mask.shape
    n = clean.shape[1]
    real = clean != tok.pad_id
    clean_pos, noisy_pos, noisy = answer_positions(model, tok, tables, v, clean, masked, block_size, shown, anchoring)
    nb = n // block_size
    x = torch.cat([model.prompt_embeddings(v, tok.image_pad_id, tok.bos_id), model.embed(torch.cat([clean, noisy], 1))], 1)
    ans_block = (torch.arange(n) // block_size).expand(b, n)
    kind = torch.cat([torch.full((b, p + 1), PROMPT), torch.full((b, n), CLEAN), torch.full((b, n), NOISY)], 1)
    block = torch.cat([torch.full((b, p + 1), -1), ans_block, ans_block], 1)
    valid = torch.cat([v.vis_mask, torch.ones(b, 1, dtype=torch.bool), real, real], 1)
    positions = torch.cat([model.prompt_positions(v), clean_pos, noisy_pos], 1)
    runs = torch.cat([torch.zeros(b, p + 1 + n, dtype=torch.long), masked_run_length(masked, block_size)], 1)
    hidden, _ = model.run_layers(x, positions, segment_mask(kind, block, valid), runs=runs)
    logits = model.logits(hidden[:, p + 1 + n :])
    return model.scale_block_logits(logits.view(b * nb, block_size, -1), masked.view(b * nb, block_size)).view(b, n, -1)


def commit_own_guesses(logits: torch.Tensor, masked: torch.Tensor, block_size: int, commits: torch.Tensor):
    """The state a decode reaches after committing the model's own guesses: in each block, the
    ``commits[b, block]`` most confident masked positions take the argmax of ``logits`` (right or
    wrong), the sampler's way. Returns (still masked, shown ids). Every block keeps at least one
    masked token, so each row still has a loss. Why: the release sampler commits far guesses whenever
    no token passes the threshold, and a model trained only on true context does not learn to read
    around its own misplaced commits (docs/nano-models.md)."""
    b, n = masked.shape
    nb = n // block_size
    conf, guess = logits.float().softmax(-1).max(-1)
    m = masked.view(b, nb, block_size)
    score = torch.where(m, conf.view(b, nb, block_size), torch.full_like(conf.view(b, nb, block_size), -1.0))
    order = torch.sort(score, dim=-1, descending=True, stable=True).indices
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(block_size).expand_as(order))
    quota = torch.minimum(commits, (m.sum(-1) - 1).clamp(min=0))
    commit = (rank < quota.unsqueeze(-1)) & m
    return (m & ~commit).view(b, n), guess.view(b, n), commit.view(b, n)


def misread_neighbours(tok: SubwordTokenizer) -> list[list[int]]:
    """Per token id, the vocabulary tokens one edit away from its text (a character dropped, added
    or changed; no newlines, no special tokens): what a one-glyph misreading commits instead.
    Found with a symmetric-deletion index (two texts one edit apart share a one-deletion variant;
    the index also pairs some two edits apart, which rapidfuzz's distance drops)."""
    n = tok.vocab_size
    specials = {tok.eos_id, tok.bos_id, tok.im_end_id, tok.image_pad_id, tok.mask_id, tok.pad_id}
    texts = {i: tok.token_text(i) for i in range(n) if i not in specials}
    texts = {i: t for i, t in texts.items() if t and "\n" not in t and "\ufffd" not in t}
    index: dict[str, set[int]] = {}
    for i, t in texts.items():
        for v in {t} | {t[:k] + t[k + 1:] for k in range(len(t))}:
            index.setdefault(v, set()).add(i)
    from rapidfuzz.distance import Levenshtein  # here, not at the top: the GPU kit's device path imports this module without it

    out: list[list[int]] = [[] for _ in range(n)]
    for i, t in texts.items():
        near: set[int] = set()
        for v in {t} | {t[:k] + t[k + 1:] for k in range(len(t))}:
            near |= index.get(v, set())
        out[i] = sorted(j for j in near if j != i and Levenshtein.distance(t, texts[j]) == 1)
    return out


def misread_context(clean: torch.Tensor, neighbours: list[list[int]], rate: float,
                    generator: torch.Generator) -> torch.Tensor:
    """``clean`` with each token that has neighbours replaced, with probability ``rate``, by one of
    them drawn at random (:func:`misread_neighbours`). Why: at inference the committed text holds the
    model's own misreadings, and one that drops or adds a character moves the reading position off
    the glyphs (positions walk the committed text); a model trained only on true context then reads
    the glyphs it has already read (a ``values (``nan``, ``inf``,`` line read as ``(``an``, ``````)``,
    docs/nano-models.md). The targets stay the true tokens: read on from the glyphs, not the count.
    Measured, not shipped: both sources read worse on the validation pages (docs/nano-models.md)."""
    pick = (torch.rand(clean.shape, generator=generator) < rate).nonzero().tolist()
    noisy = clean.clone()
    for r, c in pick:
        near = neighbours[int(clean[r, c])]
        if near:
            noisy[r, c] = near[int(torch.randint(0, len(near), (1,), generator=generator))]
    return noisy


@torch.no_grad()
def own_misreads(model: NanoOCR, tok: SubwordTokenizer, tables: CharTables, v: Visual, clean: torch.Tensor,
                 rate: float, generator: torch.Generator, anchoring: Anchoring | None = None) -> torch.Tensor:
    """``clean`` where each token the model misreads at block size 1 (its argmax from the true context
    before it, the stop token aside) is, with probability ``rate``, replaced by that misreading."""
    real = clean != tok.pad_id
    guess = denoise_logits(model, tok, tables, v, clean, real, 1, anchoring=anchoring).argmax(-1)
    wrong = real & (guess != clean) & (clean != tok.eos_id) & (guess != tok.eos_id)
    keep = torch.rand(clean.shape, generator=generator) < rate
    return torch.where(wrong & keep, guess, clean)


def line_break_tokens(clean: torch.Tensor, tables: CharTables) -> torch.Tensor:
    """(B, L) True on a token that writes a newline and on the token right after one."""
    nl = tables.newlines[clean] > 0
    after = torch.cat([torch.zeros_like(nl[:, :1]), nl[:, :-1]], dim=1)
    return nl | after


def diffusion_loss(
    model: NanoOCR,
    tok: SubwordTokenizer,
    tables: CharTables,
    batch,
    block_size: int,
    generator: torch.Generator,
    ctc_weight: float = 0.5,
    eps: float = 1e-3,
    suffix_share: float = 0.0,
    near_halflife: float = 0.0,
    freeze_vision: bool = False,
    own_share: float = 0.0,
    own_max: int = 8,
    break_weight: float = 1.0,
    misread_rate: float = 0.0,
    neighbours: list[list[int]] | None = None,
    misread_source: str = "neighbours",
    teacher: NanoOCR | None = None,
    distill_weight: float = 0.0,
    anchor_reach: int = 0,
):
    """SDAR loss. A row is masked uniformly (t ~ U(0,1), each answer token masked with p = (1-eps)t + eps)
    or, with probability ``suffix_share``, as a left-to-right decode leaves a block: every block keeps a
    clean prefix of random length and masks the rest (see docs/nano-models.md for why).

    ``near_halflife`` > 0 weights each masked token's cross-entropy by 0.5 ** (run / halflife), ``run``
    being :func:`masked_run_length`: the tokens a decode commits next (those right after clean text)
    carry the loss, the far guesses of a mostly masked block little. 0 is SDAR's plain mean.

    ``freeze_vision``: the vision side (encoder, CTC head, projector) runs without gradients and the
    CTC loss is dropped, a third less time per step once the encoder reads (its CTC CER is 0.2%).

    ``own_share`` > 0: that share of rows first runs one forward without gradients and commits
    1..``own_max`` of each block's most confident guesses (:func:`commit_own_guesses`); the loss is
    then on the tokens still masked, against the truth.

    ``break_weight`` > 1 weights the masked tokens at a line break (a token that writes a newline,
    and the first token of the next line) that much more: a break read as a space sends the reading
    position into the next line's glyphs, and that line is then read twice.

    ``misread_rate`` > 0: the context (clean copy, and the noisy copy's shown tokens) holds one-edit
    misreadings at that rate (:func:`misread_context`, ``neighbours`` from :func:`misread_neighbours`);
    the loss stays against the true tokens. ``misread_source="own"`` takes the misreadings from the
    model itself instead: one block-size-1 forward without gradients reads every token from the true
    context, and each token it gets wrong enters the context with probability ``misread_rate`` (the
    errors a block-length-1 decode actually commits, at their own rate).

    ``teacher`` (the AR twin) and ``distill_weight`` w > 0: on block-size-1 batches, where every
    masked token is a frontier read from true context, exactly the AR twin's next-token question,
    the loss becomes (1 - w) CE + w KL(teacher || twin) over the masked tokens.

    ``anchor_reach`` > 0: positions walk as the decoders walk them with glyph anchoring of that reach
    (:class:`Anchoring`), the teacher's too; 0 counts characters."""
    if freeze_vision:
        with torch.no_grad():
            v = encode_batch(model, batch)
    else:
        v = encode_batch(model, batch)
    anchoring = Anchoring.of(model, tok, v, batch, anchor_reach)
    clean = block_answers(tok, batch, block_size)
    real = clean != tok.pad_id
    masked = draw_mask(real, block_size, generator, eps, suffix_share)
    shown, own = None, 0.0
    if own_share > 0:
        rows = torch.rand(clean.shape[0], 1, generator=generator) < own_share
        commits = torch.randint(1, own_max + 1, (clean.shape[0], clean.shape[1] // block_size), generator=generator)
        with torch.no_grad():
            first = denoise_logits(model, tok, tables, v, clean, masked, block_size, anchoring=anchoring)
        still, guess, commit = commit_own_guesses(first, masked, block_size, commits * rows)
        own = commit.float().sum().item() / max(masked.float().sum().item(), 1.0)
        masked, shown = still, torch.where(commit, guess, clean)
    context = clean
    if misread_rate > 0 and misread_source == "own":
        context = own_misreads(model, tok, tables, v, clean, misread_rate, generator, anchoring)
        shown = torch.where(masked, clean, context if shown is None else torch.where(shown == clean, context, shown))
    elif misread_rate > 0:
        context = misread_context(clean, neighbours, misread_rate, generator)
        shown = torch.where(masked, clean, context if shown is None else torch.where(shown == clean, context, shown))
    logits = denoise_logits(model, tok, tables, v, context, masked, block_size, shown, anchoring)
    if near_halflife > 0 or break_weight != 1.0:
        weight = torch.ones(masked.shape, dtype=torch.float32)
        if near_halflife > 0:
            weight = 0.5 ** (masked_run_length(masked, block_size).float() / near_halflife)
        if break_weight != 1.0:
            weight = weight * torch.where(line_break_tokens(clean, tables), break_weight, 1.0)
        per_token = F.cross_entropy(logits[masked].float(), clean[masked], reduction="none")
        main = (per_token * weight[masked]).sum() / weight[masked].sum()
    else:
        main = F.cross_entropy(logits[masked].float(), clean[masked])
    kl, ce = 0.0, main.item()
    if teacher is not None and distill_weight > 0 and block_size == 1:
        with torch.no_grad():
            ids = [tok.encode(r.text) for r in batch]
            tv = encode_batch(teacher, batch)
            want = ar_logits(teacher, tok, tables, tv, pad_ids(ids, tok.pad_id),
                             Anchoring.of(teacher, tok, tv, batch, anchor_reach)).float()
        log_want = want.log_softmax(-1)[masked]
        div = F.kl_div(logits[masked].float().log_softmax(-1), log_want, log_target=True, reduction="batchmean")
        main = (1 - distill_weight) * main + distill_weight * div
        kl = div.item()
    with torch.no_grad():
        acc = (logits[masked].argmax(-1) == clean[masked]).float().mean()
    ctc = torch.zeros(()) if freeze_vision else ctc_loss(model, v, batch)
    misread = ((context != clean).sum() / real.sum()).item()
    return main + ctc_weight * ctc, {"ce": ce, "acc": acc.item(), "ctc": ctc.item(),
                                     "masked": masked.float().mean().item(), "own": own, "misread": misread, "kl": kl}
