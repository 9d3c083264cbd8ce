"""MinerU2.5's greedy step over a static KV cache, replayed as a CUDA graph.

transformers' ``StaticCache`` keeps every layer's keys/values in preallocated tensors and its
length in a device tensor, so one decoding step (one token in, logits out) has fixed shapes and
no host reads: it can be captured once and replayed per token, as the diffusion model's block
forwards are (models/mineru_diffusion/graphs.py). One home cache per process is reused page after
page (reset, then prefilled); the graph is captured against it once.
"""

from __future__ import annotations

import torch

WARMUP = 2


class StaticStep:
    """Token (1, 1) and M-RoPE positions (3, 1, 1) in, logits (1, V) out, against ``cache``."""

    def __init__(self, model, cache, device: torch.device, use_graph: bool) -> None:
        self.model, self.cache, self.use_graph = model, cache, use_graph
        self.token = torch.zeros((1, 1), dtype=torch.long, device=device)
        self.pos = torch.zeros((3, 1, 1), dtype=torch.long, device=device)
        self.graph = None
        self.out: torch.Tensor | None = None

    def _run(self) -> torch.Tensor:
        return self.model(input_ids=self.token, position_ids=self.pos, cache=self.cache, use_cache=True).logits[:, -1]

    def __call__(self, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self.token.copy_(token.view(1, 1))
        self.pos.copy_(pos.view(3, 1, 1))
        if not self.use_graph:
            return self._run().float()
        if self.graph is None:
            self._capture()
        self.graph.replay()
        return self.out.float().clone()

    def _capture(self) -> None:
        """Warm up (this writes at the cache's current slot and advances its length: both restored),
        then record. Recording runs nothing, so the cache is as the caller left it."""
        lengths = [layer.cumulative_length.clone() for layer in self.cache.layers]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                self._run()
                for layer, n in zip(self.cache.layers, lengths):
                    layer.cumulative_length.copy_(n)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.out = self._run()
        self.graph = graph
