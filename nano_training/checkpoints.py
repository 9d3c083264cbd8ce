"""What both nano training scripts share: logging, the learning-rate schedule, resumable
checkpoints (weights, optimiser state, progress and RNG states in safetensors: no pickle)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file


def parse_mix(spec: str) -> tuple[list[int], list[float]]:
    pairs = [item.split(":") for item in spec.split(",")]
    return [int(a) for a, _ in pairs], [float(b) for _, b in pairs]


class Logger:
    def __init__(self, out: Path) -> None:
        self.log = open(out / "train.log", "a", buffering=1)
        self.metrics = open(out / "metrics.jsonl", "a", buffering=1)

    def __call__(self, msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, flush=True)
        self.log.write(line + "\n")

    def record(self, row: dict) -> None:
        self.metrics.write(json.dumps(row) + "\n")


def start_run(out: Path, threads: int, seed: int) -> tuple["Logger", "random.Random", torch.Generator]:
    """A training run's output folder, thread count and seeds: its logger, Python RNG and torch generator."""
    import random

    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    return Logger(out), random.Random(seed), torch.Generator().manual_seed(seed)


def lr_at(step: int, total: int, base: float, warmup: int) -> float:
    if step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return base * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def save_checkpoint(path: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, meta: dict) -> None:
    tensors = {f"model.{k}": v.detach().contiguous() for k, v in model.state_dict().items()}
    names = {id(p): n for n, p in model.named_parameters()}
    for group in opt.param_groups:
        for p in group["params"]:
            for key, val in opt.state.get(p, {}).items():
                if torch.is_tensor(val):
                    tensors[f"opt.{names[id(p)]}.{key}"] = val.detach().contiguous().reshape(val.shape)
    tmp = path.with_suffix(".tmp")
    save_file(tensors, str(tmp), metadata={"meta": json.dumps(meta)})
    tmp.replace(path)


def load_checkpoint(path: Path, model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict:
    tensors = load_file(str(path))
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    params = dict(model.named_parameters())
    for key, val in tensors.items():
        if key.startswith("opt."):
            name, field = key[4:].rsplit(".", 1)
            opt.state[params[name]][field] = val
    with safe_open(str(path), "pt") as f:
        return json.loads(f.metadata()["meta"])


def rng_to_list(state):
    return [state[0], list(state[1]), state[2]]


def rng_from_list(state):
    return (state[0], tuple(state[1]), state[2])
