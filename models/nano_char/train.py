"""Train a nano OCR twin on synthetic pages, on a CPU.

    python -m models.nano.train --kind ar --out runs/nano-ar --steps 6000
    python -m models.nano.train --kind diffusion --init runs/nano-ar/model.safetensors \\
        --out runs/nano-diffusion --steps 4000

Recipe (see docs/nano-models.md): the AR twin first (next-token loss + CTC on the encoder), then
the diffusion twin initialised from the AR weights and switched to the block-diffusion objective,
as SDAR converts an AR model. Seeded, logs to OUT/train.log and OUT/metrics.jsonl, checkpoints to
OUT/checkpoint.safetensors (weights, optimiser state and progress; no pickle) and resumes from it.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

import numpy as np
import torch
from rapidfuzz.distance import Levenshtein
from safetensors.torch import load_file, save_file

from models.nano.preprocess import collate
from models.nano_char.data import LinePool, page_samples
from models.nano_char.model import NanoConfig, NanoOCR, count_m
from models.nano_char.objectives import ar_loss, diffusion_loss
from models.nano_char.tokenizer import CharTokenizer
from models.nano_char.weights import load_model, save_model


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m models.nano.train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=["ar", "diffusion"], required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--init", type=Path, help="start from these weights (the AR twin, for diffusion)")
    ap.add_argument("--pool-pages", type=int, default=300, help="pages in the line pool")
    ap.add_argument("--pool-cache", type=Path, help="save/load the initial pool here (reused across runs)")
    ap.add_argument("--refresh-every", type=int, default=4, help="add a fresh page every N steps")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--checkpoint-every", type=int, default=250)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctc-weight", type=float, default=0.5)
    ap.add_argument("--block-sizes", default="4:0.1,8:0.15,16:0.2,32:0.55", help="diffusion block size mix")
    ap.add_argument("--span-mix", default="32:0.3,64:0.4,400:0.3", help="max characters per span : share")
    ap.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True, help="bf16 autocast")
    ap.add_argument("--ctc-positions", action=argparse.BooleanOptionalAction, default=True,
                    help="visual tokens take rotary positions from the CTC head's character count")
    # model size (ignored with --init, which brings its config)
    ap.add_argument("--d-model", type=int, default=192)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--enc-layers", type=int, default=2)
    return ap.parse_args(argv)


def parse_mix(spec: str) -> tuple[list[int], list[float]]:
    pairs = [item.split(":") for item in spec.split(",")]
    return [int(a) for a, _ in pairs], [float(b) for _, b in pairs]


class Logger:
    def __init__(self, out: Path) -> None:
        self.log = open(out / "train.log", "a", buffering=1)
        self.metrics = open(out / "metrics.jsonl", "a", buffering=1)

    def __call__(self, msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, flush=True)
        self.log.write(line + "\n")

    def record(self, row: dict) -> None:
        self.metrics.write(json.dumps(row) + "\n")


def lr_at(step: int, total: int, base: float, warmup: int) -> float:
    if step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return base * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def save_checkpoint(path: Path, model: NanoOCR, opt: torch.optim.Optimizer, meta: dict) -> None:
    tensors = {f"model.{k}": v.detach().contiguous() for k, v in model.state_dict().items()}
    names = {id(p): n for n, p in model.named_parameters()}
    for group in opt.param_groups:
        for p in group["params"]:
            state = opt.state.get(p, {})
            for key, val in state.items():
                if torch.is_tensor(val):
                    tensors[f"opt.{names[id(p)]}.{key}"] = val.detach().contiguous().reshape(val.shape)
    tmp = path.with_suffix(".tmp")
    save_file(tensors, str(tmp), metadata={"meta": json.dumps(meta)})
    tmp.replace(path)


def load_checkpoint(path: Path, model: NanoOCR, opt: torch.optim.Optimizer) -> dict:
    from safetensors import safe_open

    tensors = load_file(str(path))
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    params = dict(model.named_parameters())
    for key, val in tensors.items():
        if key.startswith("opt."):
            name, field = key[4:].rsplit(".", 1)
            opt.state[params[name]][field] = val
    with safe_open(str(path), "pt") as f:
        return json.loads(f.metadata()["meta"])


@torch.no_grad()
def quick_eval(model: NanoOCR, tok: CharTokenizer, samples, kind: str, gen: torch.Generator) -> dict:
    """Line CER of the CTC head (greedy) and teacher-forced token accuracy of the decoder."""
    model.eval()
    imgs = [s.pixels for s in samples]
    texts = [s.text for s in samples]
    x, w = collate(imgs)
    v = model.encode(x, w)
    enc, enc_len = v.enc, v.enc_len
    best = model.ctc_head(enc).argmax(-1)
    errs = total = 0
    for row, n, ref in zip(best.tolist(), enc_len.tolist(), texts):
        out, prev = [], None
        for t in row[:n]:
            if t != prev and t != tok.pad_id:
                out.append(t)
            prev = t
        errs += Levenshtein.distance(tok.decode(out), ref)
        total += len(ref)
    if kind == "ar":
        loss, parts = ar_loss(model, tok, x, w, texts)
    else:
        loss, parts = diffusion_loss(model, tok, x, w, texts, 32, gen)
    model.train()
    return {"ctc_cer": errs / max(1, total), "val_ce": parts["ce"]}


def main(argv=None) -> None:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    log = Logger(args.out)
    tok = CharTokenizer()
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)

    if args.init:

        model = load_model(args.init.parent if args.init.is_file() else args.init, dtype=torch.float32)
        model.cfg.kind = args.kind
        model.cfg.ctc_positions = args.ctc_positions
    else:
        cfg = NanoConfig(
            kind=args.kind, d_model=args.d_model, n_layers=args.layers, n_heads=args.d_model // 32,
            mlp_hidden=int(args.d_model * 8 / 3) // 32 * 32, enc_dim=args.d_model, enc_layers=args.enc_layers,
            vocab_size=tok.vocab_size, ctc_positions=args.ctc_positions,
        )
        model = NanoOCR(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    ckpt = args.out / "checkpoint.safetensors"
    step = 0
    if ckpt.exists():
        meta = load_checkpoint(ckpt, model, opt)
        step = meta["step"]
        rng.setstate(_tuple_state(meta["py_rng"]))
        gen.set_state(torch.tensor(meta["torch_rng"], dtype=torch.uint8))
        log(f"resumed from {ckpt} at step {step}")
    log(f"kind={args.kind} params={count_m(model)}M config={json.dumps(model.cfg.to_dict())} args={vars(args)}")

    pool = make_pool(args, rng, log)
    val_rng = random.Random(12345)
    val = [s for _ in range(3) for s in page_samples(val_rng, "val", augment=False, dpi=150)][:96]
    spans, span_p = parse_mix(args.span_mix)
    blocks, block_p = parse_mix(args.block_sizes)
    queue: list = []
    t0, seen_chars = time.time(), 0
    while step < args.steps:
        if not queue:
            queue = pool.batches(args.batch, 8, rng.choices(spans, span_p)[0])
        imgs, texts = queue.pop()
        x, w = collate(imgs, multiple=64)  # few distinct shapes: oneDNN caches one primitive per shape
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.steps, args.lr, args.warmup)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            if args.kind == "ar":
                loss, parts = ar_loss(model, tok, x, w, texts, args.ctc_weight)
            else:
                bs = rng.choices(blocks, block_p)[0]
                loss, parts = diffusion_loss(model, tok, x, w, texts, bs, gen, args.ctc_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item()
        opt.step()
        step += 1
        seen_chars += sum(len(t) for t in texts)
        if step % args.refresh_every == 0:
            pool.refresh(1)
        if step % args.log_every == 0:
            el = time.time() - t0
            log(f"step {step} loss {loss.item():.4f} " + " ".join(f"{k} {v:.4f}" for k, v in parts.items())
                + f" gnorm {gnorm:.2f} lr {opt.param_groups[0]['lr']:.2e} {el / args.log_every:.2f}s/step width {x.shape[-1]}")
            log.record({"step": step, "loss": loss.item(), **parts, "time": time.time(), "chars": seen_chars})
            t0 = time.time()
        if step % args.eval_every == 0 or step == args.steps:
            ev = quick_eval(model, tok, val, args.kind, torch.Generator().manual_seed(0))
            log(f"eval step {step} " + " ".join(f"{k} {v:.4f}" for k, v in ev.items()))
            log.record({"step": step, "eval": ev, "time": time.time()})
        if step % args.checkpoint_every == 0 or step == args.steps:
            meta = {"step": step, "py_rng": _list_state(rng.getstate()), "torch_rng": gen.get_state().tolist()}
            save_checkpoint(ckpt, model, opt, meta)
            save_model(model, args.out)
    log(f"done: {step} steps; weights in {args.out}")


def make_pool(args, rng: random.Random, log) -> LinePool:
    cache = args.pool_cache
    if cache and cache.exists():
        pool = LinePool.load(cache, rng)
        log(f"data: loaded {len(pool.lines)} lines from {cache}")
        return pool
    pool = LinePool(rng, args.pool_pages, log=log)
    if cache:
        pool.save(cache)
    return pool


def _list_state(state):
    return [state[0], list(state[1]), state[2]]


def _tuple_state(state):
    return (state[0], tuple(state[1]), state[2])


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
