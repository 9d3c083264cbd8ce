"""Train a nano OCR twin (subword pair) on synthetic pages, on a CPU.

    python -m nano_training.tokenizer --out runs/tokenizer.json
    python -m nano_training.train --kind ar --init-char assets/models/nano-char-ar \\
        --tokenizer runs/tokenizer.json --out runs/nano-ar --steps 4000
    python -m nano_training.train --kind diffusion --init runs/nano-ar --out runs/nano-diffusion --steps 4000

Recipe (docs/nano-models.md): the AR twin first, started from the character pair's AR twin (its
vision encoder, CTC head, projector and decoder layers; the subword embeddings start as the mean
of their characters' embeddings), then the diffusion twin initialised from the AR weights and
switched to the block-diffusion objective, as SDAR converts an AR model. Seeded; logs to
OUT/train.log and OUT/metrics.jsonl; checkpoints to OUT/checkpoint.safetensors (weights,
optimiser state, progress and RNG states; no pickle) and resumes from it.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np
import torch
from rapidfuzz.distance import Levenshtein

from nano_training.data import RegionPool, page_regions
from models.nano.model import CharTables, NanoConfig, NanoOCR, count_m, greedy_ctc_paths
from nano_training.objectives import CHARS, ar_loss, diffusion_loss, encode_batch, misread_neighbours
from models.nano.tokenizer import SubwordTokenizer
from nano_training.checkpoints import load_checkpoint, lr_at, parse_mix, rng_from_list, rng_to_list, save_checkpoint, start_run
from models.nano.weights import load_model, save_model
from models.nano_char.weights import load_model as load_char
from mudiff_viz.inputs import synth


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m nano_training.train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=["ar", "diffusion"], required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--budget", type=int, default=24000, help="line-image columns per batch (all lines of all regions)")
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--init", type=Path, help="start from these weights (a directory of this pair: the AR twin, for diffusion)")
    ap.add_argument("--init-char", type=Path, help="start from the character pair's weights (directory)")
    ap.add_argument("--tokenizer", type=Path, help="tokenizer.json (with --init-char, or alone: a new model; --init brings its own)")
    ap.add_argument("--layers", type=int, default=None,
                    help="decoder layers: of a new model or one started --init-char (default 6); with --init, a "
                         "deeper count grows the loaded decoder (see grow_decoder)")
    ap.add_argument("--d-model", type=int, default=192, help="width of a new model (no --init/--init-char)")
    ap.add_argument("--enc-layers", type=int, default=2, help="vision encoder layers of a new model")
    ap.add_argument("--pool-pages", type=int, default=250, help="pages in the region pool")
    ap.add_argument("--pool-cache", type=Path, help="save/load the initial pool here (reused across runs)")
    ap.add_argument("--refresh-every", type=int, default=4, help="add a fresh page every N steps")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--checkpoint-every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctc-weight", type=float, default=0.3)
    ap.add_argument("--suffix-share", type=float, default=0.0,
                    help="diffusion: share of rows masked as a clean prefix + masked rest in every block")
    ap.add_argument("--near-halflife", type=float, default=0.0,
                    help="diffusion: weight a masked token's loss by 0.5**(masked tokens before it / this); 0 = plain mean")
    ap.add_argument("--freeze-vision", action="store_true",
                    help="diffusion: train the decoder only (vision encoder, CTC head and projector fixed; no CTC loss)")
    ap.add_argument("--own-share", type=float, default=0.0,
                    help="diffusion: share of rows trained on a state holding the model's own committed guesses")
    ap.add_argument("--own-max", type=int, default=8, help="diffusion: at most this many own guesses per block")
    ap.add_argument("--query-shifts", type=lambda t: tuple(float(x) for x in t.split(",")), default=None,
                    help="diffusion: per head, characters per sqrt(masked run) a masked token's query looks past its "
                         "estimated start, e.g. 0,0,-2.4,-1.2,1.2,2.4 (NanoOCR.query_positions); one value per head")
    ap.add_argument("--break-weight", type=float, default=1.0,
                    help="diffusion: loss weight of masked tokens at a line break (the newline token and the next one)")
    ap.add_argument("--misread-rate", type=float, default=0.0,
                    help="diffusion: share of context tokens replaced by a one-edit misreading (targets stay true)")
    ap.add_argument("--misread-source", choices=["neighbours", "own"], default="neighbours",
                    help="diffusion: where context misreadings come from: one-edit vocabulary neighbours, or the "
                         "model's own block-size-1 errors (kept with probability --misread-rate)")
    ap.add_argument("--distill-ar", type=Path, help="diffusion: the AR twin (directory) to distil into block-size-1 reads")
    ap.add_argument("--anchor-reach", type=int, default=0,
                    help="train on glyph-anchored positions of this reach, as the decoders walk them (0: counted columns)")
    ap.add_argument("--distill-weight", type=float, default=0.5, help="diffusion: the KL share of the loss with --distill-ar")
    ap.add_argument("--block-sizes", default="8:0.2,16:0.3,32:0.5", help="diffusion block size mix")
    ap.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                    help="bf16 autocast (default: on where the CPU has AVX-512; on AVX2-only CPUs bf16 matmuls "
                         "take a slow fallback path, 2.6 s/step in fp32 against >10 s/step in bf16)")
    return ap.parse_args(argv)


def cpu_has_fast_bf16() -> bool:
    """Whether bf16 autocast pays on this CPU: PyTorch's AVX-512 kernels (AVX512, AVX512_VNNI, ...)
    run bf16 matmuls through oneDNN; below that they fall back to a slow reference GEMM."""
    return torch.backends.cpu.get_cpu_capability().startswith("AVX512")


def init_from_char(char_dir: Path, tok: SubwordTokenizer, n_layers: int, chars_per_token: float) -> NanoOCR:
    """A subword model started from the character pair: every shared part copied; decoder layers
    past the character model's depth start as identities (output projections zero); a subword's
    embedding is the mean of its characters' embeddings and its output row its first character's."""

    char = load_char(char_dir)
    cfg = NanoConfig(
        kind="ar", conv_channels=char.cfg.conv_channels, enc_dim=char.cfg.enc_dim, enc_layers=char.cfg.enc_layers,
        d_model=char.cfg.d_model, n_layers=n_layers, n_heads=char.cfg.n_heads, mlp_hidden=char.cfg.mlp_hidden,
        vocab_size=tok.vocab_size, ctc_vocab_size=char.cfg.vocab_size, rope_theta=char.cfg.rope_theta,
        chars_per_token=chars_per_token,
    )
    model = NanoOCR(cfg)
    src = char.state_dict()
    state = model.state_dict()
    for key in state:
        if key.startswith(("encoder.", "ctc_head.", "projector.", "norm.")):
            state[key] = src[key].clone()
    n = char.cfg.n_layers
    copy_layers(state, src, [i if i < n else n - 1 - (i - n) % n for i in range(n_layers)], set(range(n, n_layers)))
    emb, head = src["embed.weight"], src["lm_head.weight"]
    special = {tok.eos_id: CHARS.eos_id, tok.im_end_id: CHARS.eos_id, tok.bos_id: CHARS.bos_id,
               tok.mask_id: CHARS.mask_id, tok.pad_id: CHARS.pad_id, tok.image_pad_id: CHARS.pad_id}
    gen = torch.Generator().manual_seed(0)
    for i in range(tok.vocab_size):
        chars = [special[i]] if i in special else CHARS.encode(tok.token_text(i)) or [CHARS.unk_id]
        state["embed.weight"][i] = emb[chars].mean(0)
        state["lm_head.weight"][i] = head[chars[0]] + 0.01 * torch.randn(head.shape[1], generator=gen)
    model.load_state_dict(state)
    return model


def copy_layers(state: dict, src: dict, order: list[int], fresh: set[int]) -> None:
    """Decoder layer i of ``state`` becomes a copy of layer ``order[i]`` of ``src``; the layers in
    ``fresh`` get zero output projections, so each starts as the identity on the residual stream."""
    for key in state:
        if key.startswith("layers."):
            i = int(key.split(".")[1])
            state[key] = src[key.replace(f"layers.{i}.", f"layers.{order[i]}.", 1)].clone()
            if i in fresh and key.endswith(("attn.o.weight", "mlp.down.weight")):
                state[key] = torch.zeros_like(state[key])


def grow_decoder(model: NanoOCR, n_layers: int) -> NanoOCR:
    """The same model with ``n_layers`` decoder layers, computing the same function: the new layers
    are copies of the middle layers inserted after them, their output projections zero (so each
    starts as the identity on the residual stream and training decides what they add).

    Why the middle: the first layers read glyphs and the last ones shape the output; a token further
    into a block needs more hops between those (its start depends on the lengths of the masked tokens
    before it), which is where a deeper stack can help."""
    old = model.cfg.n_layers
    if n_layers < old:
        raise SystemExit(f"error: --layers {n_layers} is fewer than the {old} layers of the weights given with --init")
    if n_layers == old:
        return model
    k, mid = n_layers - old, old // 2  # k copies of the layers up to index mid, inserted after it
    if k > mid + 1:
        raise SystemExit(f"error: can grow {old} layers by at most {mid + 1} at once")
    grown = NanoOCR(NanoConfig.from_dict({**model.cfg.to_dict(), "n_layers": n_layers}))
    src, state = model.state_dict(), grown.state_dict()
    for key in state:
        if not key.startswith("layers."):
            state[key] = src[key].clone()
    order = list(range(mid + 1)) + list(range(mid + 1 - k, mid + 1)) + list(range(mid + 1, old))
    copy_layers(state, src, order, set(range(mid + 1, mid + 1 + k)))
    grown.load_state_dict(state)
    return grown


@torch.no_grad()
def quick_eval(model: NanoOCR, tok: SubwordTokenizer, tables: CharTables, batches, kind: str, anchor_reach: int = 0) -> dict:
    """CTC line CER (greedy) and the decoder's teacher-forced loss and token accuracy."""
    model.eval()
    errs = total = 0
    ce = acc = 0.0
    gen = torch.Generator().manual_seed(0)
    for batch in batches:
        v = encode_batch(model, batch)
        texts = [t for r in batch for t in r.line_texts]
        for path, ref in zip(greedy_ctc_paths(model.ctc_head(v.enc), v.enc_len, CHARS.pad_id), texts):
            errs += Levenshtein.distance(CHARS.decode([t for t, _ in path]), ref)
            total += len(ref)
        if kind == "ar":
            _, parts = ar_loss(model, tok, tables, batch, anchor_reach=anchor_reach)
        else:
            _, parts = diffusion_loss(model, tok, tables, batch, 32, gen, anchor_reach=anchor_reach)
        ce += parts["ce"] / len(batches)
        acc += parts["acc"] / len(batches)
    model.train()
    return {"ctc_cer": errs / max(1, total), "val_ce": ce, "val_acc": acc}


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.bf16 is None:
        args.bf16 = cpu_has_fast_bf16()
    log, rng, gen = start_run(args.out, args.threads, args.seed)

    if args.init:
        model, tok = load_model(args.init)
        tokenizer_path = args.init / "tokenizer.json"
        if args.layers:
            model = grow_decoder(model, args.layers)
        model.cfg.kind = args.kind
    elif args.tokenizer:
        n_layers = args.layers or 6
        tok = SubwordTokenizer(args.tokenizer)
        tokenizer_path = args.tokenizer
        train_text = [p for d in synth.documents("train") for p in d.paragraphs]
        chars_per_token = round(tok.chars_per_token(train_text), 3)
        if args.init_char:
            model = init_from_char(args.init_char, tok, n_layers, chars_per_token)
        else:
            d = args.d_model
            model = NanoOCR(NanoConfig(
                enc_dim=d, d_model=d, n_layers=n_layers, enc_layers=args.enc_layers, n_heads=max(1, d // 32),
                mlp_hidden=int(d * 8 / 3) // 32 * 32, vocab_size=tok.vocab_size, chars_per_token=chars_per_token,
            ))
        model.cfg.kind = args.kind
    else:
        raise SystemExit("error: give --init DIR, or --tokenizer FILE (with --init-char DIR to start from the character pair)")
    if args.query_shifts is not None:
        if len(args.query_shifts) != model.cfg.n_heads:
            raise SystemExit(f"error: --query-shifts needs one value per head ({model.cfg.n_heads})")
        model.cfg.query_shifts = args.query_shifts
    tables = CharTables.of(tok)
    model.train()
    if args.freeze_vision:
        for part in (model.encoder, model.ctc_head, model.projector):
            part.requires_grad_(False)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    ckpt = args.out / "checkpoint.safetensors"
    step = 0
    if ckpt.exists():
        meta = load_checkpoint(ckpt, model, opt)
        step = meta["step"]
        rng.setstate(rng_from_list(meta["py_rng"]))
        gen.set_state(torch.tensor(meta["torch_rng"], dtype=torch.uint8))
        log(f"resumed from {ckpt} at step {step}")
    log(f"kind={args.kind} params={count_m(model)}M config={json.dumps(model.cfg.to_dict())} args={vars(args)}")

    pool = make_pool(args, rng, log)
    val_rng = random.Random(12345)
    val = [s for _ in range(4) for s in page_regions(val_rng, "val", augment=False, dpi=150)]
    val_batches = [val[i : i + 6] for i in range(0, min(len(val), 36), 6)]
    blocks, block_p = parse_mix(args.block_sizes)
    neighbours = misread_neighbours(tok) if args.misread_rate > 0 and args.misread_source == "neighbours" else None
    teacher = load_model(args.distill_ar)[0].eval().requires_grad_(False) if args.distill_ar else None
    queue: list = []
    t0, seen_tokens = time.time(), 0
    while step < args.steps:
        if not queue:
            queue = pool.batches(args.budget, 8)
        batch = queue.pop()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.steps, args.lr, args.warmup)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            if args.kind == "ar":
                loss, parts = ar_loss(model, tok, tables, batch, args.ctc_weight, args.anchor_reach)
            else:
                bs = rng.choices(blocks, block_p)[0]
                loss, parts = diffusion_loss(model, tok, tables, batch, bs, gen, args.ctc_weight,
                                              suffix_share=args.suffix_share, near_halflife=args.near_halflife,
                                              freeze_vision=args.freeze_vision, own_share=args.own_share,
                                              own_max=args.own_max, break_weight=args.break_weight,
                                              misread_rate=args.misread_rate, neighbours=neighbours,
                                              misread_source=args.misread_source, teacher=teacher,
                                              distill_weight=args.distill_weight, anchor_reach=args.anchor_reach)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item()
        opt.step()
        step += 1
        seen_tokens += sum(len(r.text) for r in batch)
        if step % args.refresh_every == 0:
            pool.refresh(1)
        if step % args.log_every == 0:
            el = time.time() - t0
            log(f"step {step} loss {loss.item():.4f} " + " ".join(f"{k} {v:.4f}" for k, v in parts.items())
                + f" gnorm {gnorm:.2f} lr {opt.param_groups[0]['lr']:.2e} {el / args.log_every:.2f}s/step regions {len(batch)}")
            log.record({"step": step, "loss": loss.item(), **parts, "time": time.time(), "chars": seen_tokens})
            t0 = time.time()
        if step % args.eval_every == 0 or step == args.steps:
            ev = quick_eval(model, tok, tables, val_batches, args.kind, args.anchor_reach)
            log(f"eval step {step} " + " ".join(f"{k} {v:.4f}" for k, v in ev.items()))
            log.record({"step": step, "eval": ev, "time": time.time()})
        if step % args.checkpoint_every == 0 or step == args.steps:
            meta = {"step": step, "py_rng": rng_to_list(rng.getstate()), "torch_rng": gen.get_state().tolist()}
            save_checkpoint(ckpt, model, opt, meta)
            save_model(model, args.out, tokenizer_path)
    log(f"done: {step} steps; weights in {args.out}")


def make_pool(args, rng: random.Random, log) -> RegionPool:
    cache = args.pool_cache
    if cache and cache.exists():
        pool = RegionPool.load(cache, rng)
        log(f"data: loaded {len(pool.regions)} regions from {cache}")
        return pool
    pool = RegionPool(rng, args.pool_pages, log=log)
    if cache:
        pool.save(cache)
    return pool


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
