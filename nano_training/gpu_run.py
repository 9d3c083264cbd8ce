"""Train the subword pair on a lent accelerator in one command, inside a hard time budget.

    python -m nano_training.gpu_run --budget-s 540 --out $OUT          # on the device
    python -m nano_training.gpu_run unpack FILES_AT --out runs/gpu     # here: runs/gpu-ar, runs/gpu-diffusion

Everything it needs travels in the working tree: the glyph atlas and the text splits
(``assets/gpu-kit``, built here by ``nano_training.atlas_build``), the shipped subword AR twin (its
vision encoder, CTC head and tokenizer start the new model). Training regions are drawn on the
device by ``nano_training.gpu_data``; no PyMuPDF, PIL or rapidfuzz is imported on this path.

The recipe is the CPU one (docs/nano-models.md): the AR twin first, then the same weights switched to
block diffusion (suffix masks, near-weighted loss, vision frozen). The model is the largest of
:data:`SHAPES` whose float16 weights file stays under ``--max-mb``; its vision side is the shipped
twin's, so the decoder finds glyphs by the CTC positions from the first step. Schedules run on the
clock: each phase gets a share of the budget and its cosine follows the time spent. Every
``--checkpoint-s`` the current weights are written to OUT as float16 shards of at most 15 MiB (the
device returns files of at most 16 MiB), with ``train.log`` and ``metrics.jsonl``; SIGTERM or the
budget's end stops it after a last held-out evaluation (when there is time for it) and export.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

START = time.monotonic()

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

from models.nano.model import CharTables, NanoConfig, NanoOCR, count_m, param_count  # noqa: E402
from models.nano.weights import load_model, save_model  # noqa: E402
from nano_training.atlas import GlyphAtlas  # noqa: E402
from nano_training.checkpoints import Logger, lr_at, parse_mix  # noqa: E402
from nano_training.gpu_data import DevicePool, RegionBatch, held_out, load_texts  # noqa: E402
from nano_training.objectives import ar_loss, diffusion_loss  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_AR = ROOT / "assets" / "models" / "nano-subword-ar"
SHARD_BYTES = 15 * 2**20
# decoder shapes tried, widest first (heads of 32 dimensions, SwiGLU 8/3 wide): the largest that fits wins
SHAPES = [(d, n) for d in (512, 448, 384, 320, 256, 192) for n in range(12, 3, -1)]


def decoder_config(base: NanoConfig, d_model: int, n_layers: int) -> NanoConfig:
    return NanoConfig.from_dict({**base.to_dict(), "d_model": d_model, "n_layers": n_layers, "n_heads": d_model // 32,
                                 "mlp_hidden": int(d_model * 8 / 3) // 32 * 32, "kind": "ar"})


def decoder_params(cfg: NanoConfig) -> int:
    """Parameters that depend on the decoder's shape: its blocks, final norm, embeddings, output
    head, and the projector's last layer (enc_dim x 2 -> d_model)."""
    d = cfg.d_model
    block = 2 * d + 4 * d * d + 2 * (d // cfg.n_heads) + 3 * d * cfg.mlp_hidden
    return cfg.n_layers * block + d + 2 * cfg.vocab_size * d + 2 * cfg.enc_dim * d + d + cfg.count_scales


def fp16_bytes(cfg: NanoConfig) -> int:
    """The float16 weights' bytes: the vision side (the same for every decoder) plus the decoder's
    (:func:`decoder_params`; tests check it against a built model)."""
    with torch.device("meta"):
        vision = param_count(NanoOCR(NanoConfig.from_dict({**cfg.to_dict(), "n_layers": 0})))
    return 2 * (vision - decoder_params(NanoConfig.from_dict({**cfg.to_dict(), "n_layers": 0})) + decoder_params(cfg))


def largest_config(base: NanoConfig, max_mb: float) -> NanoConfig:
    """The decoder shape of :data:`SHAPES` with the most parameters whose fp16 file is <= ``max_mb`` MB
    (1e6 bytes; the safetensors header adds a few kB, kept inside by a 0.2% margin)."""
    vision = fp16_bytes(NanoConfig.from_dict({**base.to_dict(), "n_layers": 0}))
    base_dec = decoder_params(NanoConfig.from_dict({**base.to_dict(), "n_layers": 0}))
    fits = [(vision + 2 * (decoder_params(c) - base_dec), c) for c in (decoder_config(base, d, n) for d, n in SHAPES)]
    fits = [(b, c) for b, c in fits if b <= max_mb * 1e6 * 0.998]
    if not fits:
        raise SystemExit(f"error: no decoder shape fits in {max_mb} MB")
    return max(fits, key=lambda bc: bc[0])[1]


def start_model(shipped: NanoOCR, cfg: NanoConfig) -> NanoOCR:
    """A new model of shape ``cfg`` whose vision side (encoder, CTC head, projector's first layers) is the
    shipped twin's: the visual tokens' CTC positions are right from the first step. The decoder is
    new (the shipped one is narrower); a same-shape decoder is copied too."""
    model = NanoOCR(cfg)
    src, state = shipped.state_dict(), model.state_dict()
    for key, val in src.items():
        if key in state and state[key].shape == val.shape and (
                key.startswith(("encoder.", "ctc_head.", "projector.")) or cfg.d_model == shipped.cfg.d_model):
            state[key] = val.clone()
    model.load_state_dict(state)
    return model


def shard_state(model: NanoOCR) -> list[dict[str, torch.Tensor]]:
    """The fp16 state dict cut, in key order, into pieces of at most :data:`SHARD_BYTES`."""
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for key, val in model.state_dict().items():
        t = val.detach().to("cpu", torch.float16).contiguous()
        n = t.numel() * 2
        if shards[-1] and size + n > SHARD_BYTES:
            shards.append({})
            size = 0
        shards[-1][key] = t
        size += n
    return shards


def export(model: NanoOCR, out: Path, kind: str, meta: dict) -> float:
    """Write ``OUT/{kind}.{i}.safetensors`` (each under 16 MiB; config and progress in the metadata),
    each to a temporary name first. Returns the seconds it took."""
    t0 = time.monotonic()
    shards = shard_state(model)
    cfg = {"model_type": "nano", **model.cfg.to_dict(), "kind": kind}
    for i, tensors in enumerate(shards):
        path = out / f"{kind}.{i}.safetensors"
        tmp = out / f"{kind}.{i}.tmp"
        save_file(tensors, str(tmp), metadata={"config": json.dumps(cfg), "meta": json.dumps(meta),
                                               "shards": str(len(shards))})
        os.replace(tmp, path)
    return time.monotonic() - t0


def unpack(src: Path, out_prefix: Path) -> list[Path]:
    """Join the shards a device run returned into model directories ``{prefix}-ar`` and
    ``{prefix}-diffusion`` (config.json, model.safetensors, tokenizer.json: the one the run used,
    a path of this tree recorded in the shards), loadable by the app and by
    ``nano_training.evaluate --pair PREFIX``."""
    written = []
    for kind in ("ar", "diffusion"):
        paths = sorted(Path(src).glob(f"{kind}.*.safetensors"), key=lambda p: int(p.name.split(".")[1]))
        if not paths:
            continue
        with safe_open(str(paths[0]), "pt") as f:
            md = f.metadata()
        if int(md["shards"]) != len(paths):
            raise SystemExit(f"error: {src} holds {len(paths)} of the {md['shards']} shards of the {kind} twin")
        tensors: dict[str, torch.Tensor] = {}
        for p in paths:
            tensors.update(load_file(str(p)))
        cfg = json.loads(md["config"])
        tokenizer = ROOT / json.loads(md["meta"]).get("tokenizer", os.path.relpath(SHIPPED_AR / "tokenizer.json", ROOT))
        model = NanoOCR(NanoConfig.from_dict(cfg))
        model.load_state_dict({k: v.float() for k, v in tensors.items()})
        target = Path(f"{out_prefix}-{kind}")
        save_model(model, target, tokenizer, dtype=torch.float16)
        (target / "gpu-run.json").write_text(md["meta"] + "\n")
        written.append(target)
    if not written:
        raise SystemExit(f"error: no ar.*.safetensors or diffusion.*.safetensors in {src}")
    return written


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m nano_training.gpu_run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget-s", type=float, required=True, help="wall seconds from start to exit, setup included")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-mb", type=float, default=25.0, help="largest fp16 weights file (MB)")
    ap.add_argument("--d-model", type=int, help="decoder width (with --layers; default: the largest under --max-mb)")
    ap.add_argument("--layers", type=int, help="decoder layers (with --d-model)")
    ap.add_argument("--from-ar", type=Path, help="skip the AR phase: diffusion from this AR twin directory")
    ap.add_argument("--ar-share", type=float, default=0.4, help="share of the training time for the AR phase")
    ap.add_argument("--steps", type=int, help="stop after this many steps in all (CPU checks); split by --ar-share")
    ap.add_argument("--lr", type=float, default=1.5e-3, help="AR peak learning rate")
    ap.add_argument("--diffusion-lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=float, default=0.03, help="warm-up, as a share of each phase")
    ap.add_argument("--batch-cols", type=int, default=0,
                    help="line-image columns per batch (nano_training.train --budget); 0: 24000 on a CPU as the CPU "
                         "recipe, 96000 on a GPU (a step of this model is bound by kernel launches, not by FLOPs, "
                         "so four times the samples cost little more time: docs/gpu-training.md)")
    ap.add_argument("--pool-pages", type=int, default=200, help="pages drawn before training")
    ap.add_argument("--pool-s", type=float, default=0.0,
                    help="at most this many seconds drawing the first pool (0: 8%% of the budget); fewer pages then")
    ap.add_argument("--refresh-pages", type=int, default=1, help="fresh pages drawn per step")
    ap.add_argument("--page-lines", type=int, help="at most this many body lines a page (small CPU checks)")
    ap.add_argument("--val-pages", type=int, default=4)
    ap.add_argument("--suffix-share", type=float, default=0.7)
    ap.add_argument("--near-halflife", type=float, default=2.0)
    ap.add_argument("--freeze-vision", action=argparse.BooleanOptionalAction, default=True,
                    help="diffusion phase: train the decoder only")
    ap.add_argument("--block-sizes", default="8:0.2,16:0.3,32:0.5")
    ap.add_argument("--ctc-weight", type=float, default=0.3)
    ap.add_argument("--checkpoint-s", type=float, default=60.0)
    ap.add_argument("--eval-s", type=float, default=60.0)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--device", default="auto", help="auto (cuda if there is one), cuda or cpu")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args(argv)


class Stop:
    """SIGTERM (a ``timeout`` running out) asks for a clean stop: the loop ends, the weights are saved."""

    def __init__(self) -> None:
        self.asked = False
        signal.signal(signal.SIGTERM, self._ask)

    def _ask(self, *_):
        self.asked = True


def phase_loss(model: NanoOCR, tok, tables, batch, phase: str, gen: torch.Generator, ctc_weight: float,
               block: int = 32, mixed: bool = True, **diffusion: float | bool) -> tuple[torch.Tensor, dict]:
    """One batch's loss and its parts in ``phase`` ("ar" or "diffusion"; ``diffusion``: the
    objective's keywords). The objectives build masks and indices on the default device, so it is
    set to the model's; ``mixed``: bf16 autocast on a GPU. The training step, the held-out loss and
    ``gpu_throughput`` all take this one function."""
    device = next(model.parameters()).device
    with torch.device(device), torch.autocast(device.type, dtype=torch.bfloat16,
                                              enabled=mixed and device.type == "cuda"):
        if phase == "ar":
            return ar_loss(model, tok, tables, batch, ctc_weight)
        return diffusion_loss(model, tok, tables, batch, block, gen, ctc_weight, **diffusion)


@torch.no_grad()
def held_out_loss(model: NanoOCR, tok, tables, batches, kind: str, device) -> dict:
    """Mean cross-entropy and accuracy over the held-out batches (fp32, no CTC term, block 32)."""
    model.eval()
    gen = torch.Generator(device=device).manual_seed(0)
    ce = acc = 0.0
    for b in batches:
        _, parts = phase_loss(model, tok, tables, b, kind, gen, 0.0, mixed=False, freeze_vision=True)
        ce += parts["ce"] / len(batches)
        acc += parts["acc"] / len(batches)
    model.train()
    return {"val_ce": ce, "val_acc": acc}


def main(argv=None) -> None:
    args = parse_args(argv)
    deadline = START + args.budget_s
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          args.device if args.device != "auto" else "cpu")
    if args.threads:
        torch.set_num_threads(args.threads)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if not args.batch_cols:
        args.batch_cols = 96000 if device.type == "cuda" else 24000
    args.out.mkdir(parents=True, exist_ok=True)
    log = Logger(args.out)
    stop = Stop()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    gen = torch.Generator(device=device).manual_seed(args.seed)

    shipped, tok = load_model(SHIPPED_AR)
    tok_path = SHIPPED_AR / "tokenizer.json"
    if args.from_ar:
        model, tok = load_model(args.from_ar)
        tok_path = args.from_ar / "tokenizer.json"
    else:
        cfg = (decoder_config(shipped.cfg, args.d_model, args.layers) if args.d_model and args.layers
               else largest_config(shipped.cfg, args.max_mb))
        model = start_model(shipped, cfg)
    tok_rel = os.path.relpath(tok_path.resolve(), ROOT)  # unpack finds it in the same tree here
    model.to(device).train()
    tables = CharTables.of(tok).to(device)
    atlas = GlyphAtlas(device=device)
    texts = load_texts()
    t_data = time.monotonic()
    pool = DevicePool(atlas, texts["train"], args.pool_pages, rng, gen, args.page_lines,
                      seconds=args.pool_s or 0.08 * args.budget_s)
    val = held_out(atlas, texts["val"], args.val_pages, 12345, device, args.page_lines)
    val_batches = [RegionBatch(val[i : i + 6]) for i in range(0, min(len(val), 36), 6)]
    log(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else os.cpu_count()} "
        f"{'GPU' if device.type == 'cuda' else 'CPUs'}); torch {torch.__version__}; params {count_m(model)}M, "
        f"fp16 {2 * param_count(model) / 1e6:.1f} MB; batches of {args.batch_cols} columns; "
        f"config {json.dumps(model.cfg.to_dict())}")
    log(f"data: {len(pool.regions)} regions from {pool.pages} pages and {len(val)} held-out regions in "
        f"{time.monotonic() - t_data:.1f} s; setup done {time.monotonic() - START:.1f} s after start")

    phases = [] if args.from_ar else [("ar", args.ar_share)]
    phases.append(("diffusion", 1.0 - (0.0 if args.from_ar else args.ar_share)))
    blocks, block_p = parse_mix(args.block_sizes)
    cost = {"eval": 0.0, "save": 0.0, "step": 0.0}  # seconds the last evaluation, export and step took

    def reserve() -> float:
        """Seconds kept at the end: a step that starts just before it, the last export with room to
        spare, and the last evaluation where it is cheap (a GPU's second or two; on a CPU a full-size
        evaluation can take a minute, better spent training: it is skipped then)."""
        return cost["step"] + 1.5 * cost["save"] + 2.0 + min(cost["eval"], 0.05 * args.budget_s)

    def evaluate(phase: str, step: int, note: str = "") -> dict | None:
        """The held-out loss, logged, unless it would not leave time for the export at the end."""
        if cost["eval"] and time.monotonic() + cost["eval"] + 1.5 * cost["save"] + 1.0 > deadline:
            log(f"eval {phase} step {step} skipped: the budget's end is near")
            return None
        t0 = time.monotonic()
        ev = held_out_loss(model, tok, tables, val_batches, phase, device)
        cost["eval"] = time.monotonic() - t0
        log(f"eval {phase} step {step} " + " ".join(f"{k} {v:.4f}" for k, v in ev.items()) + note)
        log.record({"phase": phase, "step": step, "eval": ev, "time": time.monotonic() - START, "final": bool(note)})
        return ev

    def save(phase: str, meta: dict) -> None:
        cost["save"] = export(model, args.out, phase, {"phase": phase, **meta, "time": time.monotonic() - START,
                                                       "tokenizer": tok_rel})

    step_total = 0
    for index, (phase, share) in enumerate(phases):
        model.cfg.kind = phase
        if phase == "diffusion" and args.freeze_vision:
            for part in (model.encoder, model.ctc_head, model.projector):
                part.requires_grad_(False)
        params = [p for p in model.parameters() if p.requires_grad]
        base_lr = args.lr if phase == "ar" else args.diffusion_lr
        opt = torch.optim.AdamW(params, lr=base_lr, weight_decay=0.01, betas=(0.9, 0.98),
                                fused=device.type == "cuda")
        left_share = sum(s for _, s in phases[index:])
        # the held-out loss this phase starts from: always for the first phase, for a later one if the
        # rest of the budget is worth ten evaluations
        if index == 0 or deadline - time.monotonic() > 10 * cost["eval"] + reserve():
            evaluate(phase, 0)
        save(phase, {"step": 0})
        t_phase = now = time.monotonic()
        phase_end = now + (deadline - reserve() - now) * share / left_share
        phase_steps = None if args.steps is None else max(1, round(args.steps * share))
        step, queue, t_log, data_s = 0, [], now, 0.0
        last_ckpt = last_eval = now
        while not stop.asked:
            now = time.monotonic()
            if (phase_steps is not None and step >= phase_steps) or now >= min(phase_end, deadline - reserve()):
                break
            progress = max((now - t_phase) / max(phase_end - t_phase, 1e-6),
                           0.0 if phase_steps is None else step / phase_steps)
            for g in opt.param_groups:
                g["lr"] = lr_at(int(progress * 10000), 10000, base_lr, int(args.warmup * 10000))
            t_d = time.monotonic()
            if not queue:
                queue = pool.batches(args.batch_cols, 8)
            batch = queue.pop()
            data_s += time.monotonic() - t_d
            block = rng.choices(blocks, block_p)[0] if phase == "diffusion" else 32
            loss, parts = phase_loss(model, tok, tables, batch, phase, gen, args.ctc_weight, block,
                                     suffix_share=args.suffix_share, near_halflife=args.near_halflife,
                                     freeze_vision=args.freeze_vision)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(params, 1.0).item()
            opt.step()
            cost["step"] = time.monotonic() - now
            step += 1
            step_total += 1
            t_d = time.monotonic()
            pool.refresh(args.refresh_pages)
            data_s += time.monotonic() - t_d
            if step % args.log_every == 0:
                el = time.monotonic() - t_log
                log(f"{phase} step {step} loss {loss.item():.4f} " + " ".join(f"{k} {v:.4f}" for k, v in parts.items())
                    + f" gnorm {gnorm:.2f} lr {opt.param_groups[0]['lr']:.2e} {el / args.log_every:.3f}s/step "
                    f"(data {data_s / args.log_every:.3f}) regions {len(batch)}")
                log.record({"phase": phase, "step": step, "loss": loss.item(), **parts, "s_per_step": el / args.log_every,
                            "data_s_per_step": data_s / args.log_every, "time": time.monotonic() - START})
                t_log, data_s = time.monotonic(), 0.0
            if time.monotonic() - last_eval >= args.eval_s:
                evaluate(phase, step)
                last_eval = time.monotonic()
            if time.monotonic() - last_ckpt >= args.checkpoint_s:
                save(phase, {"step": step})
                last_ckpt = time.monotonic()
        ev = evaluate(phase, step, " (end of phase)") or {}
        save(phase, {"step": step, **ev})
        log(f"{phase} done: {step} steps in {time.monotonic() - t_phase:.0f} s")
        if stop.asked:
            log("stopped by SIGTERM")
            break
    log(f"done: {step_total} steps; {time.monotonic() - START:.1f} s of the {args.budget_s:.0f} s budget; weights in {args.out}")


def cli(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "unpack":
        ap = argparse.ArgumentParser(prog="python -m nano_training.gpu_run unpack")
        ap.add_argument("src", type=Path, help="the folder the device run's files came back to")
        ap.add_argument("--out", type=Path, required=True, help="prefix P: writes P-ar and P-diffusion")
        a = ap.parse_args(argv[1:])
        if not a.src.is_dir():
            raise SystemExit(f"error: {a.src} is not a folder")
        for p in unpack(a.src, a.out):
            print(f"wrote {p}")
        return
    main(argv)


if __name__ == "__main__":
    cli()

