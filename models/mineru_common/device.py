"""Where and how the MinerU models run: dtype by device, and whether forwards replay as CUDA graphs."""

from __future__ import annotations

import os

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
