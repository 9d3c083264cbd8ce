"""Where and how the MinerU models run: dtype by device, and whether forwards replay as CUDA graphs."""

from __future__ import annotations

import os
import sys

import torch


def dtype_for(device: torch.device) -> torch.dtype:
    """bfloat16 on CUDA (the release's dtype), float32 on CPU (bf16 matmuls are slow there)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def graphs_wanted(device: torch.device) -> bool:
    """CUDA graphs on CUDA unless MUDIFF_CUDA_GRAPHS=0 (both models then run eagerly: a fair comparison either way)."""
    return device.type == "cuda" and os.environ.get("MUDIFF_CUDA_GRAPHS", "1") not in ("0", "false", "no")


def cuda_emulated() -> bool:
    """True under ZeroGPU's CUDA emulation (the ``spaces`` package on a ZeroGPU Space): CUDA tensors
    are stand-ins until a GPU call, so no CUDA work (pinned host memory included) may run yet."""
    return "spaces" in sys.modules and os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


def staging_device(device: str | torch.device) -> torch.device:
    """Where a checkpoint's tensors are read before they move to ``device``: the CPU under CUDA
    emulation (safetensors' own CUDA path stages through pinned memory, which the emulation refuses;
    a plain ``.to("cuda")`` is what the emulation intercepts), else ``device`` itself."""
    device = torch.device(device)
    return torch.device("cpu") if device.type == "cuda" and cuda_emulated() else device
