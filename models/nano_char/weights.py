"""Save and load the character pair's weights: ``config.json`` + ``model.safetensors`` (no pickle,
no tokenizer file: the character alphabet is fixed). The format is the subword pair's (models/nano/weights.py)."""

from __future__ import annotations

from pathlib import Path

import torch

from models.nano.weights import load_weights, read_config, save_weights
from models.nano_char.model import NanoOCR


def save_model(model: NanoOCR, out_dir: Path, dtype: torch.dtype = torch.float32) -> None:
    save_weights(model, model.cfg.to_dict(), out_dir, dtype)


def load_model(model_dir: Path, dtype: torch.dtype = torch.float32) -> NanoOCR:
    """Build the model from ``config.json`` and load ``model.safetensors`` strictly."""
    return load_weights(NanoOCR(read_config(model_dir)), model_dir, dtype)
