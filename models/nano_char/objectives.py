"""Training objectives of the nano twins: the attention masks and the losses.

AR: [prompt ; answer] with a causal answer, next-token loss.
Diffusion (SDAR / block diffusion, docs/nano-models.md): [prompt ; clean answer ; noisy answer],
the noisy copy reusing the clean copy's positions, with the four rules

    clean -> clean   block-causal (block(k) <= block(q))
    noisy -> clean   strictly earlier blocks
    noisy -> noisy   same block only
    clean -> noisy   never

and cross-entropy on the masked positions. The prompt ([visual tokens ; <bos>]) is visible to all,
and sees only itself. Both add the CTC loss on the vision encoder.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from models.nano_char.model import NanoOCR
from models.nano_char.tokenizer import CharTokenizer

PROMPT, CLEAN, NOISY = 0, 1, 2


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


def ctc_loss(model: NanoOCR, enc: torch.Tensor, enc_len: torch.Tensor, targets: list[list[int]], blank: int) -> torch.Tensor:
    logp = model.ctc_head(enc).float().log_softmax(-1).transpose(0, 1)  # T, B, V
    flat = torch.tensor([t for seq in targets for t in seq], dtype=torch.long)
    lens = torch.tensor([len(seq) for seq in targets], dtype=torch.long)
    return F.ctc_loss(logp, flat, enc_len, lens, blank=blank, zero_infinity=True)


def _pad(seqs: list[list[int]], value: int) -> torch.Tensor:
    n = max(len(s) for s in seqs)
    return torch.tensor([s + [value] * (n - len(s)) for s in seqs], dtype=torch.long)


def ar_loss(model: NanoOCR, tok: CharTokenizer, images, widths, texts: list[str], ctc_weight: float = 0.5):
    v = model.encode(images, widths)
    enc, enc_len, vis, vis_mask = v.enc, v.enc_len, v.vis, v.vis_mask
    ids = [tok.encode(t) for t in texts]
    inputs = _pad(ids, tok.pad_id)  # t1..tn
    targets = _pad([s + [tok.eos_id] for s in ids], tok.pad_id)  # t1..tn, eos
    b, p = vis_mask.shape
    n = inputs.shape[1]
    bos = torch.full((b, 1), tok.bos_id, dtype=torch.long)
    x = torch.cat([vis, model.embed(torch.cat([bos, inputs], 1))], 1)
    kind = torch.cat([torch.full((b, p + 1), PROMPT), torch.full((b, n), CLEAN)], 1)
    block = torch.cat([torch.full((b, p + 1), -1), torch.arange(n).expand(b, n)], 1)
    valid = torch.cat([vis_mask, torch.ones(b, 1, dtype=torch.bool), inputs != tok.pad_id], 1)
    positions = torch.cat([model.prompt_positions(v), torch.arange(n, dtype=torch.float32).expand(b, n)], 1)
    hidden, _ = model.run_layers(x, positions, segment_mask(kind, block, valid))
    logits = model.logits(hidden[:, p:])  # predictions from <bos>, t1..tn
    main = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=tok.pad_id)
    ctc = ctc_loss(model, enc, enc_len, ids, tok.pad_id)
    return main + ctc_weight * ctc, {"ce": main.item(), "ctc": ctc.item()}


def diffusion_loss(
    model: NanoOCR,
    tok: CharTokenizer,
    images,
    widths,
    texts: list[str],
    block_size: int,
    generator: torch.Generator,
    ctc_weight: float = 0.5,
    eps: float = 1e-3,
):
    v = model.encode(images, widths)
    enc, enc_len, vis, vis_mask = v.enc, v.enc_len, v.vis, v.vis_mask
    ids = [tok.encode(t) for t in texts]
    answers = []
    for s in ids:  # text, <eos>, then <eos> up to the end of that block
        n = len(s) + 1
        n_full = -(-n // block_size) * block_size
        answers.append(s + [tok.eos_id] * (n_full - len(s)))
    clean = _pad(answers, tok.pad_id)
    b, p = vis_mask.shape
    n = clean.shape[1]
    real = clean != tok.pad_id
    t = torch.rand(b, 1, generator=generator)
    prob = (1 - eps) * t + eps
    masked = (torch.rand(b, n, generator=generator) < prob) & real
    # at least one masked token per row
    none = ~masked.any(1)
    if none.any():
        first = torch.argmax(real.float() * torch.rand(b, n, generator=generator), dim=1)
        masked[none, first[none]] = True
    noisy = torch.where(masked, torch.full_like(clean, tok.mask_id), clean)
    bos = torch.full((b, 1), tok.bos_id, dtype=torch.long)
    x = torch.cat([vis, model.embed(torch.cat([bos, clean, noisy], 1))], 1)
    ans_block = (torch.arange(n) // block_size).expand(b, n)
    kind = torch.cat([torch.full((b, p + 1), PROMPT), torch.full((b, n), CLEAN), torch.full((b, n), NOISY)], 1)
    block = torch.cat([torch.full((b, p + 1), -1), ans_block, ans_block], 1)
    valid = torch.cat([vis_mask, torch.ones(b, 1, dtype=torch.bool), real, real], 1)
    ans_pos = torch.arange(n, dtype=torch.float32).expand(b, n)
    positions = torch.cat([model.prompt_positions(v), ans_pos, ans_pos], 1)
    hidden, _ = model.run_layers(x, positions, segment_mask(kind, block, valid))
    logits = model.logits(hidden[:, p + 1 + n :])
    main = F.cross_entropy(logits[masked], clean[masked])
    ctc = ctc_loss(model, enc, enc_len, ids, tok.pad_id)
    return main + ctc_weight * ctc, {"ce": main.item(), "ctc": ctc.item(), "masked": masked.float().mean().item()}
