"""Save and load nano weights: ``config.json`` + ``model.safetensors`` + ``tokenizer.json``
(no pickle, no training code)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors import SafetensorError
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


def read_config(model_dir: Path, needs: tuple[str, ...] = ()) -> NanoConfig:
    """``config.json`` of a nano model directory that also holds ``model.safetensors`` and ``needs``."""
    model_dir = Path(model_dir)
    names = ("config.json", "model.safetensors", *needs)
    if not all((model_dir / n).is_file() for n in names):
        raise ModelLoadError(f"{model_dir} is not a nano model (needs {', '.join(names)})")
    return NanoConfig.from_dict(json.loads((model_dir / "config.json").read_text()))


def load_weights(model: torch.nn.Module, model_dir: Path, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """Load ``model.safetensors`` into ``model`` strictly (a missing or extra key is an error)."""
    path = Path(model_dir) / "model.safetensors"
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:  # truncated, corrupt, or not safetensors at all
        raise ModelLoadError(f"{path} cannot be read as safetensors ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}): "
                             "the file is truncated or corrupt; copy it again") from None
    own = model.state_dict()
    shapes = [f"{k} {tuple(v.shape)} (config.json wants {tuple(own[k].shape)})" for k, v in state.items()
              if k in own and v.shape != own[k].shape]
    if shapes:
        raise ModelLoadError(f"{path} does not match config.json: {len(shapes)} tensors of another shape, first {shapes[0]}")
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    if missing or unexpected:
        raise ModelLoadError(f"{path}: missing keys {sorted(missing)[:5]}, unexpected keys {sorted(unexpected)[:5]}")
    return model.to(dtype).eval()


def load_model(model_dir: Path, dtype: torch.dtype = torch.float32) -> tuple[NanoOCR, SubwordTokenizer]:
    """Build the model from ``config.json``, load ``model.safetensors`` strictly, and its tokenizer."""
    cfg = read_config(model_dir, needs=("tokenizer.json",))
    tok = SubwordTokenizer(Path(model_dir) / "tokenizer.json")
    if tok.vocab_size != cfg.vocab_size:
        raise ModelLoadError(f"{Path(model_dir) / 'tokenizer.json'} has {tok.vocab_size} ids; the model expects {cfg.vocab_size}")
    return load_weights(NanoOCR(cfg), model_dir, dtype), tok
