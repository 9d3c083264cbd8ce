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
    return device.type == "cuda" and not graphs_turned_off()


def graphs_turned_off() -> bool:
    return os.environ.get("MUDIFF_CUDA_GRAPHS", "1") in ("0", "false", "no")


def graphs_choice(exec_mode: str, device: torch.device) -> str:
    """Whether this decode's forwards replayed as CUDA graphs, and why not: "on", "off: MUDIFF_CUDA_GRAPHS=0",
    "off: no CUDA" or "off: eager" (a model or path without graphs). The release runs eagerly, so
    only "off" timings compare with its numbers (docs/real-models.md#cuda-graphs)."""
    if exec_mode == "cuda-graphs":
        return "on"
    if device.type != "cuda":
        return "off: no CUDA"
    return "off: MUDIFF_CUDA_GRAPHS=0" if graphs_turned_off() else "off: eager"


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
