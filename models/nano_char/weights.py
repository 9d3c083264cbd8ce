"""Save and load nano weights: ``config.json`` + ``model.safetensors`` (no pickle, no training code)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from models.nano.weights import save_weights
from models.nano_char.model import NanoConfig, NanoOCR
from mudiff_viz.core.errors import ModelLoadError


def save_model(model: NanoOCR, out_dir: Path, dtype: torch.dtype = torch.float32) -> None:
    save_weights(model, model.cfg.to_dict(), out_dir, dtype)


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
