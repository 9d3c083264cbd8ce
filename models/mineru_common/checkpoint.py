"""Reading a checkpoint directory in the official Hugging Face layout, safetensors only.

Weights come from ``model.safetensors`` or from the shards named by ``model.safetensors.index.json``.
Pickle files (``*.bin``) are never opened: they can execute code. Key checks are strict and name
the offending keys, because a silently random-initialised weight gives plausible-looking garbage.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import safe_open

from models.mineru_common.device import staging_device
from mudiff_viz.core.errors import ModelLoadError

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"


def read_json(path: Path, required: bool = True) -> dict | None:
    """A JSON object from the checkpoint, or None when optional and absent."""
    if not path.is_file():
        if required:
            raise ModelLoadError(f"{path.parent} has no {path.name}")
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path} is not a JSON object")
    return data


def weight_files(model_dir: Path) -> list[Path]:
    """The safetensors files holding the weights (index first, then a single file)."""
    index = read_json(model_dir / INDEX_NAME, required=False)
    if index is not None:
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelLoadError(f"{model_dir / INDEX_NAME} has no weight_map")
        names = sorted(set(weight_map.values()))
        files = []
        for name in names:
            path = model_dir / str(name)  # shards may be symlinks (hub cache snapshots): not resolved
            if not isinstance(name, str) or Path(name).name != name or not path.is_file():
                raise ModelLoadError(f"{model_dir / INDEX_NAME} names a missing or nested shard: {name}")
            files.append(path)
        return files
    if (model_dir / SINGLE_NAME).is_file():
        return [model_dir / SINGLE_NAME]
    if any(model_dir.glob("*.bin")):
        raise ModelLoadError(f"{model_dir} holds only pickle weights (*.bin); convert them to safetensors")
    raise ModelLoadError(f"{model_dir} has no {SINGLE_NAME} or {INDEX_NAME}")


def load_state_dict(
    model_dir: Path, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
) -> dict[str, torch.Tensor]:
    """All tensors of the checkpoint, cast to ``dtype`` (floating tensors only) on ``device``. Under
    ZeroGPU's CUDA emulation they are read on the CPU, then moved (``staging_device``)."""
    state: dict[str, torch.Tensor] = {}
    device = torch.device(device)
    staging = staging_device(device)
    for path in weight_files(model_dir):
        try:
            with safe_open(str(path), framework="pt", device=str(staging)) as f:
                for key in f.keys():
                    if key in state:
                        raise ModelLoadError(f"tensor {key} appears in more than one shard ({path.name})")
                    t = f.get_tensor(key)
                    t = t.to(dtype) if dtype is not None and t.is_floating_point() else t
                    state[key] = t if staging == device else t.to(device)
        except ModelLoadError:
            raise
        except Exception as exc:  # corrupt header, truncated file
            raise ModelLoadError(f"cannot read {path.name}: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    return state


def _names(keys: list[str], limit: int = 6) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" (+{len(keys) - limit} more)" if len(keys) > limit else "")


def check_keys(expected: Mapping[str, tuple[int, ...]], found: Mapping[str, torch.Tensor], what: str) -> None:
    """Raise ModelLoadError naming missing, unexpected and wrongly shaped keys (one line)."""
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    shapes = sorted(
        f"{k} {tuple(found[k].shape)} != {tuple(expected[k])}"
        for k in set(expected) & set(found)
        if tuple(found[k].shape) != tuple(expected[k])
    )
    problems = []
    if missing:
        problems.append(f"missing keys: {_names(missing)}")
    if unexpected:
        problems.append(f"unexpected keys: {_names(unexpected)}")
    if shapes:
        problems.append(f"wrong shapes: {_names(shapes, 3)}")
    if problems:
        raise ModelLoadError(f"{what} does not match its config: " + "; ".join(problems))
