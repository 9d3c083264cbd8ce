"""GPU check: both real architectures at full size with random bf16 weights, against the memory floor.

For MinerU-Diffusion (2.7B) and MinerU2.5 (Qwen2-VL ViT + a Qwen2-0.5B-sized decoder, about 1.2B:
an approximation of the release's config, which no file here holds) it reports, per execution mode:

- ms per denoising step at 32 and at 1 token (the eager loop, and the fused loop whose step is the
  forward plus the scheduler captured as one CUDA graph), and ms per AR step;
- the bandwidth floor: the bytes of the weights one step reads (decoder layers and output head; the
  vision tower runs once per page and the embedding table is only looked up) over the device's
  measured copy bandwidth, and each step's ratio to it;
- the recording overhead (fused loop, recording on vs off, same run), peak memory, prefill time;
- parity: logits of the eager and the graph forward at block 8 and 32, and the fused loop's tokens
  against the eager loop's.

Random weights say nothing about accuracy, and little about tokens per forward (a random model is
rarely confident: blocks take close to ``steps`` forwards); what is measured is the cost per step.

  python scripts/gpu_check.py --out docs/results/bench/gpu.json     # CUDA, full size, bf16
  python scripts/gpu_check.py --tiny --out /tmp/tiny.json   # CPU smoke run of every code path
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

from models.mineru_common.device import dtype_for  # noqa: E402
from models.mineru_common.imaging import ImagePreprocessor  # noqa: E402
from models.mineru_common.standin import write_standin_tokenizer  # noqa: E402
from models.mineru_common.text import ChatText  # noqa: E402
from models.mineru_diffusion.backend import MinerUDiffusionBackend  # noqa: E402
from models.mineru_diffusion.model import MinerUDiffusion, MinerUDiffusionConfig, SDARConfig, VisionConfig  # noqa: E402
from mudiff_viz.decoding.pipeline import decode_page  # noqa: E402
from mudiff_viz.decoding.settings import DecodeParams  # noqa: E402
from mudiff_viz.inputs.pages import load_page  # noqa: E402

TINY_TEXT = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16)
TINY_VISION = dict(depth=1, embed_dim=32, num_heads=2, mlp_ratio=2)
# MinerU2.5: the Qwen2-VL ViT and a decoder the size of Qwen2-0.5B (about 1.2B parameters in all)
AR_TEXT = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
               num_key_value_heads=2, vocab_size=151936, rope_theta=1_000_000.0, tie_word_embeddings=True,
               max_position_embeddings=32768, rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]})
AR_TINY_TEXT = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, tie_word_embeddings=True, max_position_embeddings=4096,
                    rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]})


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def copy_bandwidth(device: torch.device, mb: int) -> float:
    """Measured device memory bandwidth in GB/s: a large copy reads and writes every byte."""
    a = torch.empty(mb * 2**20, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    b.copy_(a)
    sync(device)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        b.copy_(a)
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return round(2 * a.numel() / best / 1e9, 1)


def step_bytes(modules) -> int:
    """Bytes of the weights one decoding step reads (every parameter of ``modules`` once)."""
    seen, total = set(), 0
    for m in modules:
        for p in m.parameters():
            if p.data_ptr() not in seen:
                seen.add(p.data_ptr())
                total += p.numel() * p.element_size()
    return total


# ---- MinerU-Diffusion ---------------------------------------------------------------------------


def build_diffusion(tiny: bool, device: torch.device, workdir: Path):
    """Random weights in the real architecture (full size unless tiny); returns (model, text, images)."""
    ids = write_standin_tokenizer(workdir)
    text_cfg = SDARConfig(**TINY_TEXT, vocab_size=ids["vocab"]) if tiny else SDARConfig()
    cfg = MinerUDiffusionConfig(
        text=text_cfg, vision=VisionConfig(**TINY_VISION) if tiny else VisionConfig(),
        image_token_id=ids["<|image_pad|>"], mask_token_id=ids["<|MASK|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = MinerUDiffusion(cfg)
    model = model.to(dtype_for(device)).eval()
    budget = {"max_pixels": 28 * 28 * 64} if tiny else None  # tiny: keep the CPU smoke run small
    images = ImagePreprocessor(budget, cfg.vision.patch_size, cfg.vision.temporal_patch_size, cfg.vision.spatial_merge_size)
    text = ChatText(workdir, {"image_token_id": cfg.image_token_id, "mask_token_id": cfg.mask_token_id})
    return model, text, images


def diffusion_backend(parts, exec_mode: str) -> MinerUDiffusionBackend:
    # no stop token: every requested block decodes (a random model may sample one anywhere)
    return MinerUDiffusionBackend.from_parts(*parts, spec="random-weights", exec_mode=exec_mode, stop_ids=frozenset())


def decode(backend, page, blocks: int, block_length: int = 32, fused: bool = False, record: bool = True,
           threshold: float = 0.95, decoder: str = "diffusion"):
    params = DecodeParams(max_new_tokens=block_length * blocks, record=record, threshold=threshold,
                          block_length=block_length, steps=block_length, fused=fused)
    sync(backend.device)
    trace = decode_page(page, decoder=decoder, params=params, backend=backend)
    sync(backend.device)
    return trace


def timing(trace, floor_ms: float | None) -> dict:
    m = trace.metrics
    steps = max(1, m.batched_forwards - m.commit_passes)
    ms = 1000 * m.decode_s / max(1, m.batched_forwards)
    out = {
        "ms_per_forward": round(ms, 3), "forwards": m.batched_forwards, "denoising_steps": steps,
        "tokens": m.tokens, "decode_s": m.decode_s, "prefill_s": m.prefill_s,
        "tokens_per_s": round(m.tokens / max(1e-9, m.decode_s), 2), "steps_recorded": len(trace.steps),
    }
    if floor_ms:
        out["x_floor"] = round(ms / floor_ms, 2)
    return out


def best(runs: list, key=lambda t: t.metrics.decode_s):
    return min(runs, key=key)


@torch.inference_mode()
def logit_parity(parts, page, device: torch.device, block_length: int) -> dict:
    """The same blocks through the eager forward and the graph forward, at one block length."""
    eager, graphs = diffusion_backend(parts, "eager"), diffusion_backend(parts, graph_mode(device))
    region = eager.regions(page)[0]
    gen = torch.Generator().manual_seed(block_length)
    blocks = [torch.randint(0, eager.cfg.text.vocab_size, (1, block_length), generator=gen).to(device) for _ in range(3)]
    blocks[1][0, 1:-1] = eager.mask_id
    outs = {}
    for name, backend in (("eager", eager), ("graphs", graphs)):
        ctx = backend.encode(page, [region], block_length=block_length)
        outs[name] = []
        for block in blocks:
            outs[name].append(backend.block_logits(ctx, block, None))
            backend.commit_block(ctx, block, None)
    diff = max(float((a - b).abs().max()) for a, b in zip(outs["graphs"], outs["eager"]))
    agree = sum(int((a.argmax(-1) == b.argmax(-1)).sum()) for a, b in zip(outs["graphs"], outs["eager"]))
    return {"block_length": block_length, "max_abs_logit_diff": round(diff, 5),
            "max_abs_logit": round(max(float(a.abs().max()) for a in outs["eager"]), 3),
            "argmax_agreement": round(agree / (3 * block_length), 4)}


def graph_mode(device: torch.device) -> str:
    return "cuda-graphs" if device.type == "cuda" else "static"  # CPU: the graph-ready forward, run eagerly


def check_diffusion(parts, page, device: torch.device, blocks: int, repeats: int, bandwidth: float | None) -> dict:
    model = parts[0]
    floor_bytes = step_bytes([model.decoder.layers, model.decoder.norm, model.language_model.lm_head])
    floor_ms = 1000 * floor_bytes / (bandwidth * 1e9) if bandwidth else None
    report = {"params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1),
              "step_weight_bytes": floor_bytes, "floor_ms_per_step": None if floor_ms is None else round(floor_ms, 3)}
    for mode in ("eager", graph_mode(device)):
        backend = diffusion_backend(parts, mode)
        decode(backend, page, 1)  # warm-up: kernels, allocator, graph captures
        decode(backend, page, 1, fused=True)
        decode(backend, page, 1, block_length=1, fused=True)
        eager_loop = best([decode(backend, page, blocks) for _ in range(repeats)])
        fused = best([decode(backend, page, blocks, fused=True) for _ in range(repeats)])
        fused_off = best([decode(backend, page, blocks, fused=True, record=False) for _ in range(repeats)])
        one = best([decode(backend, page, blocks * 32, block_length=1, fused=True) for _ in range(repeats)])
        whole = best([decode(backend, page, blocks, fused=True, threshold=0.0) for _ in range(repeats)])
        same = [t.id for t in eager_loop.regions[0].tokens] == [t.id for t in fused.regions[0].tokens]
        report[mode] = {
            "loop_eager_32": timing(eager_loop, floor_ms),
            "loop_fused_32": timing(fused, floor_ms),
            "loop_fused_1_token": timing(one, floor_ms),
            "threshold_0_whole_block": timing(whole, floor_ms),
            "recording_overhead": round(fused.metrics.decode_s / max(1e-9, fused_off.metrics.decode_s) - 1, 4),
            "fused_tokens_equal_eager": same,
        }
        if backend.graphs is not None:
            report[mode]["graph_captures"] = backend.graphs.captures
    report["logit_parity"] = [logit_parity(parts, page, device, L) for L in (8, 32)]
    return report


# ---- MinerU2.5 --------------------------------------------------------------------------------------


def build_ar(tiny: bool, device: torch.device, workdir: Path):
    """Random weights for a Qwen2-VL of MinerU2.5's shape, saved to ``workdir`` in the official layout."""
    from safetensors.torch import save_file
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    ids = write_standin_tokenizer(workdir)
    text = dict(AR_TINY_TEXT, vocab_size=ids["vocab"]) if tiny else dict(AR_TEXT, vocab_size=max(AR_TEXT["vocab_size"], ids["vocab"]))
    vision = dict(depth=1, embed_dim=32, num_heads=2, hidden_size=text["hidden_size"], mlp_ratio=2, patch_size=14,
                  spatial_merge_size=2, temporal_patch_size=2) if tiny else \
        dict(depth=32, embed_dim=1280, num_heads=16, hidden_size=text["hidden_size"], mlp_ratio=4)
    cfg = Qwen2VLConfig(text_config=text, vision_config=vision, image_token_id=ids["<|image_pad|>"],
                        video_token_id=ids.get("<|video_pad|>", ids["<|image_pad|>"]),
                        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
                        tie_word_embeddings=True)
    torch.manual_seed(1)
    model = Qwen2VLForConditionalGeneration(cfg).to(dtype_for(device))
    cfg.save_pretrained(workdir)
    save_file({k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"},
              str(workdir / "model.safetensors"))
    if tiny:
        (workdir / "preprocessor_config.json").write_text(json.dumps({"max_pixels": 28 * 28 * 64}))
    return workdir


def check_ar(model_dir: Path, page, device: torch.device, tokens: int, repeats: int, bandwidth: float | None) -> dict:
    from models.mineru25.backend import MinerU25Backend

    report = {}
    modes = ("eager", "static-cache", "cuda-graphs") if device.type == "cuda" else ("eager", "static-cache")
    reference = None
    for mode in modes:
        backend = MinerU25Backend(model_dir, device=str(device), spec="random-weights", exec_mode=mode,
                                  stop_ids=frozenset())  # decode exactly `tokens` tokens
        lm = backend.model.model.language_model
        floor_bytes = step_bytes([lm.layers, lm.norm, backend.model.lm_head])
        floor_ms = 1000 * floor_bytes / (bandwidth * 1e9) if bandwidth else None
        report.setdefault("params_m", backend.params_m)
        report.setdefault("step_weight_bytes", floor_bytes)
        report.setdefault("floor_ms_per_step", None if floor_ms is None else round(floor_ms, 3))
        decode(backend, page, 8, block_length=1, decoder="ar")  # warm-up (and the graph capture)
        runs = [decode(backend, page, tokens, block_length=1, decoder="ar") for _ in range(repeats)]
        off = [decode(backend, page, tokens, block_length=1, decoder="ar", record=False) for _ in range(repeats)]
        fast = best(runs)
        ids = [t.id for t in fast.regions[0].tokens]
        reference = reference or ids
        report[mode] = {**timing(fast, floor_ms),
                        "recording_overhead": round(fast.metrics.decode_s / max(1e-9, best(off).metrics.decode_s) - 1, 4),
                        "tokens_equal_eager": ids == reference}
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON report to write")
    ap.add_argument("--tiny", action="store_true", help="tiny random models (every code path, on the CPU, in seconds)")
    ap.add_argument("--device", default=None, help="cuda (default when present) or cpu")
    ap.add_argument("--blocks", type=int, default=4, help="32-token blocks per diffusion run")
    ap.add_argument("--ar-tokens", type=int, default=128, help="tokens per AR run")
    ap.add_argument("--repeats", type=int, default=2, help="runs per measurement (the best is reported)")
    ap.add_argument("--models", default="diffusion,ar", help="which to check: diffusion, ar")
    ap.add_argument("--page", default=str(ROOT / "assets" / "samples" / "scan-times.jpg"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() and not args.tiny else "cpu"))
    page = load_page(args.page)
    bandwidth = copy_bandwidth(device, 64 if args.tiny else 2048)
    report = {
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "dtype": str(dtype_for(device)).replace("torch.", ""), "tiny": args.tiny, "page": Path(args.page).name,
        "copy_bandwidth_gb_s": bandwidth,
        "note": ("random weights: timing only. A step's floor is the bytes of the weights it reads over the measured "
                 "copy bandwidth; x_floor = ms per forward / floor. Fused: the step's forward and the scheduler run "
                 "as one CUDA graph with no host check per step. MinerU2.5's config is approximated (Qwen2-VL ViT + "
                 "a Qwen2-0.5B-sized decoder)."),
    }
    wanted = {m.strip() for m in args.models.split(",")}
    with tempfile.TemporaryDirectory() as tmp:
        if "diffusion" in wanted:
            t0 = time.perf_counter()
            parts = build_diffusion(args.tiny, device, Path(tmp) / "diffusion")
            report["build_s"] = round(time.perf_counter() - t0, 2)
            report["mineru_diffusion"] = check_diffusion(parts, page, device, args.blocks, args.repeats, bandwidth)
            del parts
        if "ar" in wanted:
            ar_dir = build_ar(args.tiny, device, Path(tmp) / "ar")
            report["mineru25"] = check_ar(ar_dir, page, device, args.ar_tokens, args.repeats, bandwidth)
    report["peak_gpu_mem_gb"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if device.type == "cuda" else None
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
