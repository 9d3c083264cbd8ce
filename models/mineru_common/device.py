"""Where and how the MinerU models run: dtype by device, and whether forwards replay as CUDA graphs."""

from __future__ import annotations

import os

import torch


def dtype_for(device: torch.device) -> torch.dtype:
    """bfloat16 on CUDA (the release's dtype), float32 on CPU (bf16 matmuls are slow there)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def graphs_wanted(device: torch.device) -> bool:
    """CUDA graphs on CUDA unless MUDIFF_CUDA_GRAPHS=0 (both models then run eagerly: a fair comparison either way)."""
    return device.type == "cuda" and os.environ.get("MUDIFF_CUDA_GRAPHS", "1") not in ("0", "false", "no")
