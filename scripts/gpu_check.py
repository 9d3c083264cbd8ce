"""GPU check: the full-size MinerU-Diffusion architecture with random bf16 weights, decoding a page.

Reports per-forward time, tokens per second and the overhead of recording every step (recording
on vs off, same run, same page, same settings) as JSON. Random weights say nothing about accuracy,
and little about tokens per forward (a random model is rarely confident, so blocks take close to
``steps`` forwards); the per-forward cost and the recording overhead are what it measures.

  python scripts/gpu_check.py --out gpu.json                # CUDA, full size (2.7B), bf16
  python scripts/gpu_check.py --tiny --out tiny.json        # CPU smoke run of the same path
  python scripts/gpu_check.py --tiny --static-path --out t.json   # ... through the graph-ready forward

On CUDA the block forwards run as CUDA graphs (models/mineru_diffusion/graphs.py); the report's
``cuda_graphs`` section repeats runs on the plain eager path and checks the logits agree.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from models.mineru_common.imaging import ImagePreprocessor  # noqa: E402
from models.mineru_common.standin import write_standin_tokenizer  # noqa: E402
from models.mineru_common.text import ChatText  # noqa: E402
from models.mineru_diffusion.backend import MinerUDiffusionBackend, dtype_for  # noqa: E402
from models.mineru_diffusion.graphs import BlockGraphs  # noqa: E402
from models.mineru_diffusion.model import MinerUDiffusion, MinerUDiffusionConfig, SDARConfig, VisionConfig  # noqa: E402
from mudiff_viz.decoding.pipeline import decode_page  # noqa: E402
from mudiff_viz.decoding.settings import DecodeParams  # noqa: E402
from mudiff_viz.inputs.pages import load_page  # noqa: E402

TINY_TEXT = dict(
    hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16
)
TINY_VISION = dict(depth=1, embed_dim=32, num_heads=2, mlp_ratio=2)


def build_backend(tiny: bool, device: torch.device, workdir: Path) -> MinerUDiffusionBackend:
    """Random weights in the real architecture (full size unless tiny), behind the real backend."""
    ids = write_standin_tokenizer(workdir)
    text_cfg = SDARConfig(**TINY_TEXT, vocab_size=ids["vocab"]) if tiny else SDARConfig()
    cfg = MinerUDiffusionConfig(
        text=text_cfg,
        vision=VisionConfig(**TINY_VISION) if tiny else VisionConfig(),
        image_token_id=ids["<|image_pad|>"],
        mask_token_id=ids["<|MASK|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    config_json = {"image_token_id": cfg.image_token_id, "mask_token_id": cfg.mask_token_id}
    torch.manual_seed(0)
    with torch.device(device):
        model = MinerUDiffusion(cfg)
    model = model.to(dtype_for(device)).eval()
    budget = {"max_pixels": 28 * 28 * 64} if tiny else None  # tiny: keep the CPU smoke run small
    images = ImagePreprocessor(
        budget, cfg.vision.patch_size, cfg.vision.temporal_patch_size, cfg.vision.spatial_merge_size
    )
    backend = MinerUDiffusionBackend.from_parts(model, ChatText(workdir, config_json), images, spec="random-weights")
    backend.stop_ids = frozenset()  # decode exactly the requested blocks
    return backend


def run(backend, page, blocks: int, record: bool, threshold: float = 0.95, block_length: int = 32) -> dict:
    """One timed page decode of exactly ``32 * blocks`` tokens (stop tokens are switched off)."""
    params = DecodeParams(max_new_tokens=32 * blocks, record=record, max_seconds=None, threshold=threshold,
                             block_length=block_length, steps=min(32, block_length))
    sync = torch.cuda.synchronize if backend.device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    trace = decode_page(page, decoder="diffusion", params=params, backend=backend)
    sync()
    wall = time.perf_counter() - t0
    m = trace.metrics
    decode_s = max(1e-9, m["decode_s"])
    return {
        "wall_s": round(wall, 4),
        "prefill_s": m["prefill_s"],
        "decode_s": m["decode_s"],
        "forwards": m["batched_forwards"],
        "per_forward_ms": round(1000 * decode_s / m["batched_forwards"], 3),
        "tokens": m["tokens"],
        "tokens_per_s": round(m["tokens"] / decode_s, 2),
        "tokens_per_forward": m["tokens_per_forward"],
        "steps_recorded": len(trace.steps),
        "trace_bytes": len(trace.to_json()),
    }


@torch.inference_mode()
def graph_parity(backend, page) -> dict:
    """Logits of the same blocks through the CUDA graphs and the eager path, on one page."""
    region = backend.regions(page)[0]
    gen = torch.Generator().manual_seed(0)
    blocks = [torch.randint(0, backend.cfg.text.vocab_size, (1, 32), generator=gen).to(backend.device) for _ in range(3)]
    blocks[1][0, 4:28] = backend.mask_id
    graphs, outs = backend.graphs, {}
    for name, g in (("graphs", graphs), ("eager", None)):
        backend.graphs = g
        ctx = backend.encode(page, [region])
        outs[name] = []
        for block in blocks:
            outs[name].append(backend.block_logits(ctx, block, None))
            backend.commit_block(ctx, block, None)
    backend.graphs = graphs
    diff = max(float((a - b).abs().max()) for a, b in zip(outs["graphs"], outs["eager"]))
    scale = max(float(a.abs().max()) for a in outs["eager"])
    agree = sum(int((a.argmax(-1) == b.argmax(-1)).sum()) for a, b in zip(outs["graphs"], outs["eager"])) / (3 * 32)
    return {"max_abs_logit_diff": round(diff, 5), "max_abs_logit": round(scale, 3), "argmax_agreement": round(agree, 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON report to write")
    ap.add_argument("--tiny", action="store_true", help="tiny random model (runs on CPU in seconds)")
    ap.add_argument("--device", default=None, help="cuda (default when present) or cpu")
    ap.add_argument("--blocks", type=int, default=4, help="32-token blocks to decode per run")
    ap.add_argument("--repeats", type=int, default=2, help="runs per recording mode (best is reported)")
    ap.add_argument("--page", default=str(ROOT / "assets" / "samples" / "scan-times.jpg"))
    ap.add_argument("--static-path", action="store_true",
                    help="CPU: run the fixed-shape forward that CUDA graphs replay, eagerly (tests the graph code path)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() and not args.tiny else "cpu"))
    page = load_page(args.page)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        backend = build_backend(args.tiny, device, Path(tmp))
        build_s = time.perf_counter() - t0
        if args.static_path and backend.graphs is None:
            backend.graphs = BlockGraphs(backend.model, use_graphs=False)
        run(backend, page, 1, True)  # warm-up (kernels, allocator)
        run(backend, page, 1, True, block_length=1)
        results = {True: [], False: []}
        parallel, ar = [], []
        for _ in range(args.repeats):
            for record in (True, False):
                results[record].append(run(backend, page, args.blocks, record))
            # threshold 0 commits a whole block per forward: the cost of the parallel forward a trained
            # model gets when it is sure. Block length 1 runs one-token forwards on the same weights
            # (each token: a guess forward and a KV-commit forward; true AR needs only the first)
            parallel.append(run(backend, page, args.blocks, True, threshold=0.0))
            ar.append(run(backend, page, args.blocks, True, block_length=1))
        graphs_report = None
        if backend.graphs is not None:  # CUDA graphs (or --static-path): the same runs eagerly, and parity
            graphs = backend.graphs
            parity = graph_parity(backend, page)
            backend.graphs = None
            eager = {"record_on": min((run(backend, page, args.blocks, True) for _ in range(args.repeats)),
                                      key=lambda r: r["decode_s"]),
                     "block_length_1": run(backend, page, args.blocks, True, block_length=1)}
            backend.graphs = graphs
            graphs_report = {
                "captures": graphs.captures,
                "home_buffers_made": graphs.homes,
                "eager": eager,
                "parity": parity,
            }
    best = {k: min(v, key=lambda r: r["decode_s"]) for k, v in results.items()}
    best_parallel = min(parallel, key=lambda r: r["decode_s"])
    best_ar = min(ar, key=lambda r: r["decode_s"])
    report = {
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "dtype": str(dtype_for(device)).replace("torch.", ""),
        "tiny": args.tiny,
        "params_m": backend.params_m,
        "build_s": round(build_s, 2),
        "page": Path(args.page).name,
        "blocks": args.blocks,
        "record_on": best[True],
        "record_off": best[False],
        "recording_overhead": round(best[True]["decode_s"] / max(1e-9, best[False]["decode_s"]) - 1, 4),
        "diffusion_threshold_0": best_parallel,
        "block_length_1": best_ar,
        "forward_cost_block32_vs_token": round(best_parallel["per_forward_ms"] / max(1e-9, best_ar["per_forward_ms"]), 3),
        # AR at one token-forward per token, versus whole-block diffusion (guess + commit forward per block)
        "speedup_ceiling_vs_ar": round(best_parallel["tokens"] * best_ar["per_forward_ms"] / 1000
                                       / max(1e-9, best_parallel["decode_s"]), 3),
        "cuda_graphs": None if graphs_report is None else {
            **graphs_report,
            "speedup_record_on": round(graphs_report["eager"]["record_on"]["decode_s"] / max(1e-9, best[True]["decode_s"]), 3),
            "speedup_block_length_1": round(graphs_report["eager"]["block_length_1"]["decode_s"]
                                            / max(1e-9, best_ar["decode_s"]), 3),
        },
        "peak_gpu_mem_gb": round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if device.type == "cuda" else None,
        "note": ("random weights: timing only, no accuracy; tokens/forward of a random model is near 1 at "
                 "threshold 0.95; threshold 0 commits a whole block per forward (the parallel ceiling); "
                 "block length 1 times one-token forwards on the same weights; speedup_ceiling_vs_ar = "
                 "tokens x one-token forward time / whole-block decode time"),
    }
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
