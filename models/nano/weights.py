"""Save and load nano weights: ``config.json`` + ``model.safetensors`` + ``tokenizer.json``
(no pickle, no training code)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from models.nano.model import NanoConfig, NanoOCR
from models.nano.tokenizer import SubwordTokenizer
from mudiff_viz.core.errors import ModelLoadError


def save_weights(model: torch.nn.Module, config: dict, out_dir: Path, dtype: torch.dtype = torch.float32) -> None:
    """``model.safetensors`` (written to a temporary name, then moved: never half a file) and ``config.json``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(dtype).contiguous() for k, v in model.state_dict().items()}
    tmp = out_dir / "model.safetensors.tmp"
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    tmp.replace(out_dir / "model.safetensors")
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def save_model(model: NanoOCR, out_dir: Path, tokenizer: Path, dtype: torch.dtype = torch.float32) -> None:
    save_weights(model, {"model_type": "nano", **model.cfg.to_dict()}, out_dir, dtype)
    if Path(tokenizer).resolve() != (Path(out_dir) / "tokenizer.json").resolve():
        shutil.copyfile(tokenizer, out_dir / "tokenizer.json")


def load_model(model_dir: Path, dtype: torch.dtype = torch.float32) -> tuple[NanoOCR, SubwordTokenizer]:
    """Build the model from ``config.json``, load ``model.safetensors`` strictly, and its tokenizer."""
    model_dir = Path(model_dir)
    paths = [model_dir / n for n in ("config.json", "model.safetensors", "tokenizer.json")]
    if not all(p.is_file() for p in paths):
        raise ModelLoadError(f"{model_dir} is not a nano model (needs config.json, model.safetensors, tokenizer.json)")
    cfg = NanoConfig.from_dict(json.loads(paths[0].read_text()))
    tok = SubwordTokenizer(paths[2])
    if tok.vocab_size != cfg.vocab_size:
        raise ModelLoadError(f"{paths[2]} has {tok.vocab_size} ids; the model expects {cfg.vocab_size}")
    model = NanoOCR(cfg)
    state = load_file(str(paths[1]))
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    if missing or unexpected:
        raise ModelLoadError(f"{paths[1]}: missing keys {sorted(missing)[:5]}, unexpected keys {sorted(unexpected)[:5]}")
    return model.to(dtype).eval(), tok
