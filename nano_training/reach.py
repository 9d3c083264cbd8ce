"""How far past committed text a diffusion twin reads.

    python -m nano_training.reach assets/models/nano-subword-diffusion --pages 3

Tokens per forward at a threshold is decided by how many masked tokens next to committed text pass
it in one forward; the sampler's fallback (commit the single most confident token when none
passes) goes wrong when a token further in outranks the one right after committed text. Both are
measured here on held-out text blocks masked as a left-to-right decode leaves them (a clean prefix
of random length in every block, the rest masked), by *offset*: the number of masked tokens between
a token and the clean text before it (0 = the token a left-to-right decode commits next). Filler
<|endoftext|> tokens past the end of the text are left out.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from nano_training.data import page_regions
from models.nano.model import CharTables, NanoOCR
from nano_training.objectives import (answer_positions, block_answers, denoise_logits, draw_mask, encode_batch,
                                    masked_run_length, true_start_positions)
from models.nano.tokenizer import SubwordTokenizer
from models.nano.weights import load_model


@dataclass
class OffsetRow:
    offset: int
    tokens: int
    accuracy: float  # argmax equals the truth
    confidence: float  # mean probability of the argmax
    passing: float  # share above the threshold
    passing_correct: float  # accuracy among those above the threshold (0 when none pass)


# how far (characters) a masked token's estimated start is from its true start
ERROR_BUCKETS = ((0.0, 1.0, "<= 1"), (1.0, 2.5, "1-2.5"), (2.5, float("inf"), "> 2.5"))


@dataclass
class ErrorRow:
    offset: int
    bucket: str  # one of ERROR_BUCKETS' labels
    tokens: int
    accuracy: float


@dataclass
class Reach:
    rows: list[OffsetRow]
    blocks: int  # blocks with a masked token at offset 0
    outranked: float  # share of them where a token further in is more confident than offset 0
    outranked_wrong: float  # ... and that token is wrong: the fallback's misreads
    by_start_error: list[ErrorRow]  # accuracy by offset and by how far the estimated start is off


@torch.no_grad()
def measure(model: NanoOCR, tok: SubwordTokenizer, samples, block_size: int = 32, threshold: float = 0.95,
            max_offset: int = 8, seed: int = 0, batch_size: int = 6) -> Reach:
    """Offsets 0..max_offset over ``samples`` (RegionSample), suffix masks drawn with ``seed``."""
    tables = CharTables.of(tok)
    gen = torch.Generator().manual_seed(seed)
    sums = {j: [0, 0, 0.0, 0, 0] for j in range(max_offset + 1)}
    err_sums = {(j, label): [0, 0] for j in range(max_offset + 1) for _, _, label in ERROR_BUCKETS}
    blocks = outranked = outranked_wrong = 0
    for i in range(0, len(samples), batch_size):
        batch = samples[i : i + batch_size]
        v = encode_batch(model, batch)
        clean = block_answers(tok, batch, block_size)
        real = clean != tok.pad_id
        masked = draw_mask(real, block_size, gen, suffix_share=1.0)
        probs = denoise_logits(model, tok, tables, v, clean, masked, block_size).float().softmax(-1)
        conf, pred = probs.max(-1)
        run = masked_run_length(masked, block_size)
        text = masked & (clean != tok.eos_id)
        right = pred == clean
        _, estimated, _ = answer_positions(model, tok, tables, v, clean, masked, block_size)
        start_error = (true_start_positions(tok, tables, v, clean) - estimated).abs()
        for lo, hi, label in ERROR_BUCKETS:
            in_bucket = text & (start_error <= hi) & ((start_error > lo) | (lo == 0))
            for j in range(max_offset + 1):
                sel = in_bucket & (run == j)
                err_sums[(j, label)][0] += int(sel.sum())
                err_sums[(j, label)][1] += int(right[sel].sum())
        for j, s in sums.items():
            sel = text & (run == j)
            s[0] += int(sel.sum())
            s[1] += int(right[sel].sum())
            s[2] += float(conf[sel].sum())
            s[3] += int((conf[sel] > threshold).sum())
            s[4] += int((right & (conf > threshold))[sel].sum())
        b, n = clean.shape
        shape = (b * n // block_size, block_size)
        c, m, r, t, k = (x.reshape(shape) for x in (conf, masked, run, text, right))
        front = t & (r == 0)
        has_front = front.any(1)
        front_conf = torch.where(front, c, torch.zeros_like(c)).amax(1)
        far = m & (r > 0)
        far_conf = torch.where(far, c, torch.full_like(c, -1.0))
        best_far, best_idx = far_conf.max(1)
        beat = has_front & (best_far > front_conf)
        blocks += int(has_front.sum())
        outranked += int(beat.sum())
        outranked_wrong += int((beat & ~k.gather(1, best_idx[:, None])[:, 0]).sum())
    rows = [OffsetRow(j, s[0], s[1] / max(1, s[0]), s[2] / max(1, s[0]), s[3] / max(1, s[0]), s[4] / max(1, s[3]))
            for j, s in sums.items() if s[0]]
    by_error = [ErrorRow(j, label, s[0], s[1] / max(1, s[0])) for (j, label), s in err_sums.items() if s[0]]
    return Reach(rows, blocks, outranked / max(1, blocks), outranked_wrong / max(1, blocks), by_error)


def held_out_blocks(pages: int, seed: int = 777) -> list:
    """Text blocks of held-out (validation-split) pages, clean renders at 150 DPI."""
    rng = random.Random(seed)
    return [s for _ in range(pages) for s in page_regions(rng, "val", augment=False, dpi=150)]


def format_reach(reach: Reach, threshold: float) -> str:
    lines = [f"| offset | tokens | accuracy | mean confidence | > {threshold} | correct among those |", "|---|---|---|---|---|---|"]
    for r in reach.rows:
        lines.append(f"| {r.offset} | {r.tokens} | {r.accuracy:.3f} | {r.confidence:.3f} | {r.passing:.3f} | {r.passing_correct:.3f} |")
    lines.append(f"\n{reach.blocks} blocks; a token further in outranks offset 0 in {reach.outranked:.1%} of them "
                 f"(and is wrong in {reach.outranked_wrong:.1%})")
    labels = [label for _, _, label in ERROR_BUCKETS]
    lines += ["", "accuracy (tokens) by how far the estimated start is from the true one, in characters:", "",
              "| offset | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    cells = {(e.offset, e.bucket): f"{e.accuracy:.3f} ({e.tokens})" for e in reach.by_start_error}
    for off in sorted({e.offset for e in reach.by_start_error}):
        lines.append(f"| {off} | " + " | ".join(cells.get((off, label), "-") for label in labels) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m nano_training.reach", description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("--pages", type=int, default=3)
    ap.add_argument("--block-length", type=int, default=32)
    ap.add_argument("--threshold", type=float, default=0.95)
    ap.add_argument("--max-offset", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = load_model(args.model_dir)
    reach = measure(model, tok, held_out_blocks(args.pages), args.block_length, args.threshold, args.max_offset)
    print(format_reach(reach, args.threshold))


if __name__ == "__main__":
    main()
