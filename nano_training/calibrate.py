"""Fit a diffusion twin's per-count logit scales by cross-entropy, every other weight fixed.

    python -m nano_training.calibrate assets/models/nano-subword-diffusion runs/calibrated --pages 24

Each masked token's logits are multiplied by a learned scale chosen by how many masked tokens sit
before it in its block (``NanoOCR.scale_block_logits``). The fit uses training-split pages only,
masked as a left-to-right decode leaves a block (a clean prefix, the rest masked: the states the
release sampler meets most; clean renders at 150 DPI unless ``--augment``), and minimises the same cross-entropy the twin was trained on, so it
calibrates confidence; it is not tuned on CER or on held-out pages. The decoder's logits do not
depend on the scales, so they are computed once and the scales fit on them with L-BFGS.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import torch
import torch.nn.functional as F

from nano_training.data import page_regions
from models.nano.model import CharTables, NanoConfig, NanoOCR
from nano_training.objectives import block_answers, denoise_logits, draw_mask, encode_batch
from nano_training.reach import format_reach, held_out_blocks, measure
from models.nano.tokenizer import SubwordTokenizer
from models.nano.weights import load_model, save_model


def with_count_scales(model: NanoOCR, n: int) -> NanoOCR:
    """The same model with ``n`` count scales, all 1 (its function unchanged)."""
    cfg = NanoConfig.from_dict({**model.cfg.to_dict(), "count_scales": n})
    out = NanoOCR(cfg)
    missing, unexpected = out.load_state_dict(
        {k: v for k, v in model.state_dict().items() if k != "count_scale"}, strict=False)
    assert missing == ["count_scale"] and not unexpected, (missing, unexpected)
    return out.eval()


@torch.no_grad()
def masked_logits(model: NanoOCR, tok: SubwordTokenizer, samples, block_size: int, seed: int,
                  batch_size: int = 6) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Raw logits (scales 1), targets and masked-before counts of every masked token of ``samples``,
    each block a clean prefix of random length and the rest masked."""
    tables = CharTables.of(tok)
    gen = torch.Generator().manual_seed(seed)
    logits, targets, counts = [], [], []
    saved = model.count_scale.data.clone()
    model.count_scale.data.fill_(1.0)
    try:
        for i in range(0, len(samples), batch_size):
            batch = samples[i : i + batch_size]
            v = encode_batch(model, batch)
            clean = block_answers(tok, batch, block_size)
            masked = draw_mask(clean != tok.pad_id, block_size, gen, suffix_share=1.0)
            lg = denoise_logits(model, tok, tables, v, clean, masked, block_size).float()
            b, n = clean.shape
            m = masked.view(b, n // block_size, block_size).long()
            before = (m.cumsum(-1) - m).view(b, n)
            logits.append(lg[masked])
            targets.append(clean[masked])
            counts.append(before[masked])
    finally:
        model.count_scale.data.copy_(saved)
    return torch.cat(logits), torch.cat(targets), torch.cat(counts)


def fit_scales(logits: torch.Tensor, targets: torch.Tensor, counts: torch.Tensor, n: int) -> torch.Tensor:
    """The ``n`` scales (a count past the last uses the last) minimising mean cross-entropy."""
    idx = counts.clamp(max=n - 1)
    log_scale = torch.zeros(n, requires_grad=True)
    opt = torch.optim.LBFGS([log_scale], max_iter=300, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(logits * log_scale.exp()[idx][:, None], targets)
        loss.backward()
        return loss

    opt.step(closure)
    return log_scale.detach().exp()


def cross_entropy(logits, targets, counts, scales: torch.Tensor) -> float:
    return float(F.cross_entropy(logits * scales[counts.clamp(max=len(scales) - 1)][:, None], targets))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m nano_training.calibrate", description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir", type=Path, help="a diffusion twin (config.json, model.safetensors, tokenizer.json)")
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--pages", type=int, default=24, help="training-split pages to fit on")
    ap.add_argument("--scales", type=int, default=32, help="number of count scales")
    ap.add_argument("--block-length", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--augment", action="store_true",
                    help="fit on degraded renders at random DPI, as in training (default: clean renders at 150 DPI, "
                         "as the app renders a PDF)")
    ap.add_argument("--held-out-pages", type=int, default=3, help="validation-split pages for the report")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = load_model(args.model_dir)
    if model.cfg.kind != "diffusion":
        ap.error(f"{args.model_dir} is an {model.cfg.kind} twin; count scales serve a diffusion twin")
    model = with_count_scales(model, args.scales)
    rng = random.Random(args.seed)
    train = [s for _ in range(args.pages) for s in
             page_regions(rng, "train", augment=args.augment, dpi=None if args.augment else 150)]
    fit_data = masked_logits(model, tok, train, args.block_length, args.seed)
    val = held_out_blocks(args.held_out_pages)
    val_data = masked_logits(model, tok, val, args.block_length, seed=777)
    ones = torch.ones(args.scales)
    before = measure(model, tok, val, args.block_length)
    scales = fit_scales(*fit_data, args.scales)
    model.count_scale.data.copy_(scales)
    after = measure(model, tok, val, args.block_length)
    print(f"fit on {len(fit_data[1])} masked tokens of {len(train)} training-split blocks ({args.pages} pages)")
    print(f"cross-entropy, training tokens: {cross_entropy(*fit_data, ones):.4f} -> {cross_entropy(*fit_data, scales):.4f}")
    print(f"cross-entropy, {len(val_data[1])} held-out tokens: {cross_entropy(*val_data, ones):.4f} -> "
          f"{cross_entropy(*val_data, scales):.4f}")
    print("scales by masked tokens before: " + ", ".join(f"{k}:{s:.3f}" for k, s in enumerate(scales.tolist())))
    print("\nheld-out reach, scales 1:\n" + format_reach(before, 0.95))
    print("\nheld-out reach, fitted:\n" + format_reach(after, 0.95))
    save_model(model, args.out_dir, args.model_dir / "tokenizer.json", dtype=torch.float16)
    print(f"\nwrote {args.out_dir} (fp16)")


if __name__ == "__main__":
    main()
