"""Block forwards replayed as CUDA graphs: the decode is launch-bound, not compute-bound.

On an H200 an eager block forward of the 2.7B model takes ~26 ms whether it carries 1 or 32
tokens (docs/benchmarks.md): the GPU waits on Python launching ~500 small kernels. A CUDA graph
records those launches once and replays them with one call. Graphs need fixed shapes and no host
reads, which ``MinerUDiffusion.static_block_forward`` provides; this module owns the buffers the
graphs read (block ids, start position, the home KV buffers) and captures one graph per
(block length, logits?) per process; only growing the home buffers means a fresh capture.

On CPU (``use_graphs=False``) the same static forward runs eagerly, which is how the tests check
it against the plain path.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from models.base import StepPolicy
from models.mineru_diffusion.model import KVCache, MinerUDiffusion

WARMUP = 2  # eager runs on a side stream before capture (allocator and library handles settle)


@dataclass
class _Captured:
    graph: object  # torch.cuda.CUDAGraph
    ids: torch.Tensor
    start: torch.Tensor
    out: object  # logits, None (a commit pass), or a denoising step's outputs (tuple of tensors)
    step: torch.Tensor | None = None  # the step index a captured denoising step reads


class BlockGraphs:
    """Runs block forwards against one cache at a time with fixed shapes (graphs on CUDA).

    Graphs point at the cache's buffers, so every new cache (every page or layout block)
    is moved into one set of *home* buffers that the graphs keep using: its committed keys/values
    are copied in (a few hundred MB at most, well under a millisecond) and the graphs are captured
    once per process, not once per page. The cache that owned the home buffers before is marked
    evicted and refuses further forwards rather than read another page's keys. Model work is
    serialised (one queue slot in the app), so only one cache is live at a time anyway.
    """

    def __init__(self, model: MinerUDiffusion, use_graphs: bool, headroom: int = 2048) -> None:
        self.model = model
        self.use_graphs = use_graphs
        self.headroom = headroom  # slots reserved past the prompt when home buffers are (re)made
        self._owner: KVCache | None = None
        self._captured: dict[tuple, _Captured] = {}
        self._pool = None  # one memory pool for every graph: they replay one after another
        self.captures = 0  # how many graphs were recorded (the GPU check reports it)
        self.homes = 0  # how many times home buffers were (re)made
        self._lock = threading.Lock()

    def forward(self, cache: KVCache, block_ids: torch.Tensor, store: bool) -> torch.Tensor | None:
        """Logits (1, L, V) for ``store=False``; for ``store=True`` the block's keys/values are kept."""
        if cache.evicted:
            raise RuntimeError("this KV cache was evicted by a later decode (model work must be serialised)")
        n = block_ids.shape[1]
        with self._lock:
            self._adopt(cache, cache.length + n)
            if self.use_graphs:
                logits = self._replay(cache, block_ids, store)
            else:  # the same buffers and the same fixed-shape forward, run eagerly
                start = torch.tensor(cache.length, device=block_ids.device)
                logits = self.model.static_block_forward(cache, block_ids, start, logits=not store)
            if store:
                cache.advance(n)
        return logits

    def step(self, cache: KVCache, block_ids: torch.Tensor, policy: StepPolicy, step_index: int):
        """The block forward and the policy's step together (its StepOutput), replayed as one CUDA
        graph when the policy is capturable; on CPU, or when sampling, the same two calls run eagerly
        over the same fixed-shape buffers. Outputs are copied out of the graph's pool."""
        if cache.evicted:
            raise RuntimeError("this KV cache was evicted by a later decode (model work must be serialised)")
        n = block_ids.shape[1]
        force = step_index >= policy.limit
        with self._lock:
            self._adopt(cache, cache.length + n)
            if self.use_graphs and policy.capturable:
                key = ("step", n, force, policy.key, cache.rope_in_dtype)
                entry = self._captured.get(key)
                if entry is None:
                    entry = self._captured[key] = self._capture_step(cache, block_ids, policy, force)
                entry.ids.copy_(block_ids)
                entry.start.fill_(cache.length)
                entry.step.fill_(min(step_index, policy.limit - 1))
                entry.graph.replay()
                return type(entry.out)(*(t.clone() for t in vars(entry.out).values()))
            start = torch.tensor(cache.length, device=block_ids.device)
            logits = self.model.static_block_forward(cache, block_ids, start, logits=True).float()
            masked = block_ids == policy.mask_id
            return policy.force(logits, masked) if force else policy.step(logits, masked, step_index)

    def _capture_step(self, cache: KVCache, block_ids: torch.Tensor, policy: StepPolicy, force: bool) -> _Captured:
        ids = block_ids.clone()
        start = torch.full((), cache.length, dtype=torch.long, device=block_ids.device)
        step = torch.zeros((), dtype=torch.long, device=block_ids.device)

        def run():
            logits = self.model.static_block_forward(cache, ids, start, logits=True).float()
            masked = ids == policy.mask_id
            return policy.force(logits, masked) if force else policy.step(logits, masked, step)

        graph, out = self._record(run, block_ids.device)
        return _Captured(graph=graph, ids=ids, start=start, out=out, step=step)

    def _record(self, fn, device: torch.device):
        """Warm ``fn`` up on a side stream, then capture it into the shared pool; returns (graph, outputs)."""
        side = torch.cuda.Stream(device=device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                fn()
        torch.cuda.current_stream(device).wait_stream(side)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            out = fn()
        self.captures += 1
        return graph, out

    def _adopt(self, cache: KVCache, need: int) -> None:
        """Make ``cache`` use the home buffers (grown if ``need`` does not fit; graphs then recaptured)."""
        if cache is self._owner and cache.capacity >= need:
            return
        old = self._owner
        if cache is not old and old is not None and old.capacity >= max(need, cache.length + self.headroom // 4):
            for layer in range(len(cache.k)):  # reuse the home buffers: copy the committed part in
                old.k[layer][:, :, : cache.length] = cache.k[layer][:, :, : cache.length]
                old.v[layer][:, :, : cache.length] = cache.v[layer][:, :, : cache.length]
            cache.k, cache.v = old.k, old.v
        else:  # first cache, or it does not fit: grow it and make its buffers the new home
            cache.reserve(max(need, cache.length + self.headroom, 2 * cache.capacity if cache is old else 0))
            self._captured.clear()
            self.homes += 1
        if old is not None and old is not cache:
            old.k, old.v = [None] * len(old.k), [None] * len(old.v)
            old.evicted = True
        self._owner = cache

    def _replay(self, cache: KVCache, block_ids: torch.Tensor, store: bool) -> torch.Tensor | None:
        key = (block_ids.shape[1], store, cache.rope_in_dtype)
        entry = self._captured.get(key)
        if entry is None:
            entry = self._captured[key] = self._capture(cache, block_ids, store)
        entry.ids.copy_(block_ids)
        entry.start.fill_(cache.length)
        entry.graph.replay()
        return None if entry.out is None else entry.out.clone()

    def _capture(self, cache: KVCache, block_ids: torch.Tensor, store: bool) -> _Captured:
        ids = block_ids.clone()
        start = torch.full((), cache.length, dtype=torch.long, device=block_ids.device)
        # the warm-up and captured runs write keys/values only into the free slots from cache.length on
        graph, out = self._record(lambda: self.model.static_block_forward(cache, ids, start, logits=not store),
                                  block_ids.device)
        return _Captured(graph=graph, ids=ids, start=start, out=out)
