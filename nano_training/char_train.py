"""Continue training the character pair's diffusion twin (``nano-char-diffusion``) on a block-size mix.

    python -m nano_training.char_train --init assets/models/nano-char-diffusion --out runs/char-b1 \\
        --steps 800 --pool-cache runs/pool-train.npz --block-sizes 1:0.6,4:0.1,8:0.1,32:0.2

Why: the ``self-speculative`` decoder's tokens are the twin's block-length-1 decode, and this twin
was first trained on blocks of 4-32 characters only (docs/nano-models.md). With block size 1 in the
SDAR objective, every masked character is one ``<mask>`` right after clean text, seeing that text
and itself: exactly the self-speculative query. For those batches every character is masked (each
is an independent frontier read, so nothing is gained by showing some of them clean).

The samples are the lines of the subword pair's region pool (``nano_training.data``: the same
synthetic pages, damage and line crops), read as whole lines, one line per row as the character
pair reads. The vision side (encoder, CTC head, projector) stays fixed: the visual tokens' rotary
positions come from the CTC head, and the decoder layers are what learn the new query.
Seeded; logs to OUT/train.log and OUT/metrics.jsonl; weights (config.json + model.safetensors)
written to OUT at every evaluation and at the end.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from models.nano.anchor import anchored_column
from models.nano.model import greedy_ctc_paths
from models.nano.preprocess import collate
from models.nano.tokenizer import CharTokenizer
from models.nano_char.model import NanoOCR, Visual
from models.nano_char.weights import load_model, save_model
from nano_training.checkpoints import lr_at, parse_mix, start_run
from nano_training.data import RegionPool, page_regions
from nano_training.objectives import CLEAN, NOISY, PROMPT, block_ids, draw_mask, segment_mask

Line = tuple[np.ndarray, str]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m nano_training.char_train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--init", required=True, type=Path, help="the character diffusion twin to continue")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--batch", type=int, default=32, help="lines per batch")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--block-sizes", default="1:0.6,4:0.1,8:0.1,32:0.2", help="diffusion block size : share")
    ap.add_argument("--pool-cache", required=True, type=Path, help="a region pool saved by nano_training.train")
    ap.add_argument("--refresh-every", type=int, default=8, help="add a fresh page's lines every N steps")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--val-pages", type=int, default=3, help="validation-split pages for the evaluations")
    ap.add_argument("--anchor-reach", type=int, default=0,
                    help="train on glyph-anchored positions of this reach, as the backend places them (0: counted)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    return ap.parse_args(argv)


def region_lines(regions) -> list[Line]:
    return [(pix, text) for r in regions for pix, text in zip(r.lines, r.line_texts) if text.strip()]


def width_batches(lines: list[Line], rng: random.Random, batch: int, n_batches: int) -> list[list[Line]]:
    """``n_batches`` batches of random lines, bucketed by width so padding stays small."""
    picked = sorted((rng.choice(lines) for _ in range(batch * n_batches)), key=lambda s: s[0].shape[1])
    out = [picked[i : i + batch] for i in range(0, len(picked), batch)]
    rng.shuffle(out)
    return out


def block_mask(real: torch.Tensor, block_size: int, generator: torch.Generator) -> torch.Tensor:
    """Which answer characters are masked. Block size 1: all of them (each is a frontier read of
    its own). Otherwise the subword pair's uniform SDAR draw (:func:`objectives.draw_mask`)."""
    return real.clone() if block_size == 1 else draw_mask(real, block_size, generator)


def ctc_readings(model: NanoOCR, tok: CharTokenizer, v: Visual) -> list[str]:
    """Each line's greedy CTC reading: what the backend's glyph anchoring aligns committed text with."""
    return ["".join(tok.token_text(t) for t, _ in path)
            for path in greedy_ctc_paths(model.ctc_head(v.enc), v.enc_len, tok.pad_id)]


def anchored_positions(tok: CharTokenizer, clean: torch.Tensor, readings: list[str], reach: int,
                       block_size: int) -> torch.Tensor:
    """(B, n) rotary positions of the answer characters as the backend places them with glyph
    anchoring (models/nano_char/backend.py): character k at k plus the row's shift, the shift moved
    after every committed block (of ``block_size`` characters) so that the column lands on the CTC
    reading's closest prefix (models/nano/anchor.py)."""
    out = []
    for ids, ctc in zip(clean.tolist(), readings):
        text, shift, row = "", 0, []
        for j, t in enumerate(ids):
            if j % block_size == 0:
                block_shift = shift
            row.append(j + block_shift)
            if t != tok.pad_id:
                text += tok.decode([t])
                if (j + 1) % block_size == 0:
                    shift = anchored_column(text, ctc, j + 1 + shift, reach) - (j + 1)
        out.append(row)
    return torch.tensor(out, dtype=torch.float32)


def denoise_logits(model: NanoOCR, tok: CharTokenizer, v: Visual, clean: torch.Tensor, masked: torch.Tensor,
                   block_size: int, anchor_reach: int = 0) -> torch.Tensor:
    """(B, n, V) logits of the noisy copy in [prompt ; clean answer ; noisy answer]; answer character
    k at rotary position k in both copies (the character pair's convention, models/nano_char/model.py),
    moved by glyph anchoring of ``anchor_reach`` (:func:`anchored_positions`; 0: counted)."""
    real = clean != tok.pad_id
    noisy = torch.where(masked, torch.full_like(clean, tok.mask_id), clean)
    b, p = v.vis_mask.shape
    n = clean.shape[1]
    bos = torch.full((b, 1), tok.bos_id, dtype=torch.long, device=clean.device)
    x = torch.cat([v.vis, model.embed(torch.cat([bos, clean, noisy], 1))], 1)
    ans_block = (torch.arange(n) // block_size).expand(b, n)
    kind = torch.cat([torch.full((b, p + 1), PROMPT), torch.full((b, n), CLEAN), torch.full((b, n), NOISY)], 1)
    block = torch.cat([torch.full((b, p + 1), -1), ans_block, ans_block], 1)
    valid = torch.cat([v.vis_mask, torch.ones(b, 1, dtype=torch.bool), real, real], 1)
    if anchor_reach > 0:
        ans_pos = anchored_positions(tok, clean, ctc_readings(model, tok, v), anchor_reach, block_size)
    else:
        ans_pos = torch.arange(n, dtype=torch.float32).expand(b, n)
    positions = torch.cat([model.prompt_positions(v), ans_pos, ans_pos], 1)
    hidden, _ = model.run_layers(x, positions, segment_mask(kind, block, valid))
    return model.logits(hidden[:, p + 1 + n :])


def diffusion_loss(model: NanoOCR, tok: CharTokenizer, batch: list[Line], block_size: int,
                   generator: torch.Generator, anchor_reach: int = 0) -> tuple[torch.Tensor, dict]:
    """SDAR cross-entropy on the masked characters of a batch of lines (vision side frozen)."""
    images, widths = collate([pix for pix, _ in batch])
    with torch.no_grad():
        v = model.encode(images, widths)
    clean = block_ids(tok, [text for _, text in batch], block_size)
    real = clean != tok.pad_id
    masked = block_mask(real, block_size, generator)
    logits = denoise_logits(model, tok, v, clean, masked, block_size, anchor_reach)[masked].float()
    main = F.cross_entropy(logits, clean[masked])
    acc = (logits.argmax(-1) == clean[masked]).float().mean()
    return main, {"ce": main.item(), "acc": acc.item(), "masked": (masked.sum() / real.sum()).item()}


@torch.no_grad()
def evaluate(model: NanoOCR, tok: CharTokenizer, batches: list[list[Line]], block_sizes: tuple[int, ...],
             anchor_reach: int = 0) -> dict:
    """Held-out masked-character loss and accuracy per block size (fixed masks, fixed seed)."""
    model.eval()
    out = {}
    for bs in block_sizes:
        gen = torch.Generator().manual_seed(0)
        parts = [diffusion_loss(model, tok, b, bs, gen, anchor_reach)[1] for b in batches]
        out[f"b{bs}_ce"] = float(np.mean([q["ce"] for q in parts]))
        out[f"b{bs}_acc"] = float(np.mean([q["acc"] for q in parts]))
    model.train()
    return out


def main(argv=None) -> None:
    args = parse_args(argv)
    log, rng, gen = start_run(args.out, args.threads, args.seed)
    tok = CharTokenizer()
    model = load_model(args.init)
    model.cfg.kind = "diffusion"
    for part in (model.encoder, model.ctc_head, model.projector):
        part.requires_grad_(False)
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr,
                            weight_decay=0.01, betas=(0.9, 0.98))
    log(f"init {args.init} args={vars(args)}")
    pool = RegionPool.load(args.pool_cache, rng)
    lines = region_lines(pool.regions)
    log(f"data: {len(lines)} lines from {args.pool_cache}")
    val_rng = random.Random(12345)
    val = region_lines([r for _ in range(args.val_pages) for r in page_regions(val_rng, "val", augment=False, dpi=150)])
    val_batches = width_batches(val, random.Random(0), 32, 4)
    blocks, block_p = parse_mix(args.block_sizes)
    log(f"eval step 0 " + " ".join(f"{k} {v:.4f}" for k, v in evaluate(model, tok, val_batches, (1, 32), args.anchor_reach).items()))
    queue: list = []
    cursor, t0 = 0, time.time()
    for step in range(1, args.steps + 1):
        if not queue:
            queue = width_batches(lines, rng, args.batch, 16)
        batch = queue.pop()
        for g in opt.param_groups:
            g["lr"] = lr_at(step - 1, args.steps, args.lr, args.warmup)
        bs = rng.choices(blocks, block_p)[0]
        loss, parts = diffusion_loss(model, tok, batch, bs, gen, args.anchor_reach)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item()
        opt.step()
        if step % args.refresh_every == 0:  # a fresh page's lines replace the oldest ones
            for line in region_lines(page_regions(rng, "train")):
                lines[cursor % len(lines)] = line
                cursor += 1
        if step % args.log_every == 0:
            el = (time.time() - t0) / args.log_every
            log(f"step {step} block {bs} loss {loss.item():.4f} acc {parts['acc']:.4f} gnorm {gnorm:.2f} "
                f"lr {opt.param_groups[0]['lr']:.2e} {el:.2f}s/step")
            log.record({"step": step, "block": bs, **parts, "time": time.time()})
            t0 = time.time()
        if step % args.eval_every == 0 or step == args.steps:
            ev = evaluate(model, tok, val_batches, (1, 32), args.anchor_reach)
            log(f"eval step {step} " + " ".join(f"{k} {v:.4f}" for k, v in ev.items()))
            log.record({"step": step, "eval": ev, "time": time.time()})
            save_model(model, args.out)
    log(f"done: {args.steps} steps; weights in {args.out}")


if __name__ == "__main__":
    main()
