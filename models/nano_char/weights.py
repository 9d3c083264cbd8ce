"""Save and load nano weights: ``config.json`` + ``model.safetensors`` (no pickle, no training code)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from models.nano_char.model import NanoConfig, NanoOCR
from mudiff_viz.core.errors import ModelLoadError


def save_model(model: NanoOCR, out_dir: Path, dtype: torch.dtype = torch.float32) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(dtype).contiguous() for k, v in model.state_dict().items()}
    tmp = out_dir / "model.safetensors.tmp"
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    tmp.replace(out_dir / "model.safetensors")
    (out_dir / "config.json").write_text(json.dumps(model.cfg.to_dict(), indent=2) + "\n")


def load_model(model_dir: Path, dtype: torch.dtype = torch.float32) -> NanoOCR:
    """Build the model from ``config.json`` and load ``model.safetensors`` strictly."""
    model_dir = Path(model_dir)
    cfg_path, weights_path = model_dir / "config.json", model_dir / "model.safetensors"
    if not cfg_path.is_file() or not weights_path.is_file():
        raise ModelLoadError(f"{model_dir} is not a nano model (needs config.json and model.safetensors)")
    cfg = NanoConfig.from_dict(json.loads(cfg_path.read_text()))
    model = NanoOCR(cfg)
    state = load_file(str(weights_path))
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    if missing or unexpected:
        raise ModelLoadError(f"{weights_path}: missing keys {sorted(missing)[:5]}, unexpected keys {sorted(unexpected)[:5]}")
    return model.to(dtype).eval()
