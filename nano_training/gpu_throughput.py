"""What one training step of the GPU kit costs, measured where it runs (CPU here, the device there).

    python -m nano_training.gpu_throughput --device cpu --threads 1
    python -m nano_training.gpu_throughput --device cuda          # on the device, before a long run

For the decoder shape ``nano_training.gpu_run`` picks (or ``--d-model``/``--layers``) and the shipped
shape, on one fixed batch of ``--batch-cols`` line-image columns: seconds per AR and per diffusion
step (forward, backward, optimiser), the FLOPs of a step (``torch.utils.flop_counter``: matrix
products, convolutions, attention; forward and backward) and the number of aten operators a step
dispatches (each is at least one kernel launch on a GPU, which bounds a small model's step from
below); and how fast pages are drawn (lines per second). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from models.nano.model import CharTables, count_m
from models.nano.weights import load_model
from nano_training.atlas import GlyphAtlas
from nano_training.gpu_data import DevicePool, load_texts
from nano_training.gpu_run import SHIPPED_AR, decoder_config, largest_config, phase_loss, start_model


class OpCounter(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts the aten operators dispatched (a lower bound on kernel launches)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


def step_fn(model, tok, tables, batch, kind: str, gen, opt):
    def run():
        loss, _ = phase_loss(model, tok, tables, batch, kind, gen, 0.3, suffix_share=0.7, near_halflife=2.0,
                             freeze_vision=True)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return run


def measure(cfg_name: str, model, tok, batch, device, steps: int) -> dict:
    tables = CharTables.of(tok).to(device)
    gen = torch.Generator(device=device).manual_seed(0)
    out = {"params_m": count_m(model), "d_model": model.cfg.d_model, "layers": model.cfg.n_layers}
    for kind in ("ar", "diffusion"):
        model.cfg.kind = kind
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        run = step_fn(model, tok, tables, batch, kind, gen, opt)
        run()  # warm-up
        flops = FlopCounterMode(display=False)
        with flops:
            run()
        ops = OpCounter()
        with ops:
            run()
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            run()
        if device.type == "cuda":
            torch.cuda.synchronize()
        out[kind] = {"s_per_step": (time.perf_counter() - t0) / steps, "gflop_per_step": flops.get_total_flops() / 1e9,
                     "aten_ops_per_step": ops.ops}
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m nano_training.gpu_throughput", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch-cols", type=int, default=24000)
    ap.add_argument("--max-mb", type=float, default=25.0)
    ap.add_argument("--pages", type=int, default=3, help="pages drawn to time the data and fill the batch")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    shipped, tok = load_model(SHIPPED_AR)
    atlas = GlyphAtlas(device=device)
    rng = random.Random(0)
    gen = torch.Generator(device=device).manual_seed(0)
    t0 = time.perf_counter()
    pool = DevicePool(atlas, load_texts()["train"], args.pages, rng, gen)
    if device.type == "cuda":
        torch.cuda.synchronize()
    draw_s = time.perf_counter() - t0
    lines = sum(len(r.lines) for r in pool.regions)
    ops = OpCounter()
    with ops:
        pool.refresh(1)
    batch = max(pool.batches(args.batch_cols, 8), key=lambda b: sum(r.width for r in b))
    report = {
        "device": str(device), "threads": torch.get_num_threads(), "torch": torch.__version__,
        "data": {"pages": args.pages, "lines": lines, "seconds": draw_s, "lines_per_s": lines / draw_s,
                 "s_per_page": draw_s / args.pages, "aten_ops_per_page": ops.ops},
        "batch": {"regions": len(batch), "lines": len(batch.widths), "columns": int(batch.widths.sum()),
                  "answer_chars": sum(len(r.text) for r in batch)},
    }
    big = largest_config(shipped.cfg, args.max_mb)
    report["largest"] = measure("largest", start_model(shipped, big).to(device).train(), tok, batch, device, args.steps)
    report["shipped_shape"] = measure("shipped", start_model(shipped, decoder_config(shipped.cfg, 192, 6)).to(device).train(),
                                      tok, batch, device, args.steps)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
