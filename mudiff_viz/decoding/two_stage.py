"""The two-stage page parse: layout detection, then recognition per detected block.

Stage 1 decodes the whole page with the backend's layout prompt; the backend parses the answer into
regions (for MinerU models: models/mineru_common/layout.py). Stage 2 decodes each block with the
prompt for its type. Both stages land in one Trace: region 0 is the layout pass (kind "layout"),
then one region per detected block with its page box and type, so the app can draw the boxes and
replay both stages on one clock.
"""

from __future__ import annotations

import time
from dataclasses import replace

from models.base import LayoutParser
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.observers import ProgressFn
from mudiff_viz.decoding.sequential import Decode, decode_sequential, merge_traces, placeholder
from mudiff_viz.inputs.page import Page


def decode_two_stage(
    backend: LayoutParser, page: Page, decode: Decode, params, progress: ProgressFn | None = None,
    layout_prompt: str = "detection", snapshot=None, batch: bool = False,
) -> Trace:
    """Layout pass (asked with ``layout_prompt``), then recognition of every detected block; one Trace.
    ``batch``: the blocks as batches (one per token limit) rather than one at a time."""
    if not isinstance(backend, LayoutParser):
        raise UserInputError(f"layout mode needs a model with a layout prompt (MinerU); {backend.name} has none")
    def task_of(region) -> str:
        return backend.task_of(region.prompt) if hasattr(backend, "task_of") else "text"

    layout_trace = decode(backend, page, [backend.layout_region(page, layout_prompt)],
                          pass_params(backend, params, "layout"), None)
    blocks = backend.parse_layout(layout_trace.regions[0].text, page, params.layout_rules)
    region_tasks = ["layout"] + [None if b.meta.get("skip") else task_of(b) for b in blocks]
    tasks = [t for t in region_tasks if t is not None]
    extra = {"mode": "layout", "layout_prompt": layout_prompt, "layout_blocks": len(blocks),
             "layout_continues": [i + 1 for i, b in enumerate(blocks) if b.meta.get("continues")],
             "task_tokens": {t: pass_params(backend, params, t).max_new_tokens for t in dict.fromkeys(tasks)},
             "batched_blocks": batch,
             "region_tasks": region_tasks}
    if not blocks:
        return merge_traces([layout_trace], extra_params=extra)
    if batch:
        return decode_batches(page, blocks, lambda regions, own: decode(backend, page, regions, own, None), params,
                              layout_trace, extra, progress,
                              lambda region: pass_params(backend, params, task_of(region)))
    return decode_sequential(backend, page, blocks, decode, params, progress, before=[layout_trace], extra_params=extra,
                             snapshot=snapshot, params_for=lambda region: pass_params(backend, params, task_of(region)))


def decode_batches(page, blocks, decode_batch, params, layout_trace: Trace, extra: dict, progress,
                   params_for) -> Trace:
    """The blocks that share their pass params (token limit) as one batch each, after the layout pass;
    the time limit covers them all (a batch reached after it ran out is kept undecoded)."""
    start = time.perf_counter() - layout_trace.metrics.get("wall_s", 0.0)
    groups: dict = {}
    for i, block in enumerate(blocks):
        if not block.meta.get("skip"):
            groups.setdefault(params_for(block).max_new_tokens, []).append(i)
    parts: list = [layout_trace]
    slot = [0] * len(blocks)  # each block's index among the merged regions (the layout pass is 0)
    at, truncated = 1, None
    for done, members in enumerate(groups.values()):
        own = params_for(blocks[members[0]])
        left = None if params.max_seconds is None else params.max_seconds - (time.perf_counter() - start)
        if left is not None and left <= 0:
            truncated = f"time limit of {params.max_seconds:.0f} s"
            parts.extend(placeholder(blocks[i]) for i in members)
        else:
            parts.append(decode_batch([blocks[i] for i in members], replace(own, max_seconds=left)))
        for k, i in enumerate(members):
            slot[i] = at + k
        at += len(members)
        if progress:
            progress(done + 1, len(groups))
    for i, block in enumerate(blocks):
        if block.meta.get("skip"):
            parts.append(placeholder(block))
            slot[i] = at
            at += 1
    return merge_traces(parts, extra_params=extra, truncated=truncated, order=[0, *slot])


def pass_params(backend, params, task: str):
    """One pass's params: max_new_tokens is the ceiling of every pass; with ``task_limits``
    "release" each task also stays within its model's shipped limit for it (``backend.task_tokens``:
    MinerU-Diffusion's release, layout and tables 2048, text and formulas 1024; MinerU2.5's client
    sets none)."""
    limits = getattr(backend, "task_tokens", None) or {}
    if params.task_limits != "release" or not limits:
        return params
    return replace(params, max_new_tokens=min(limits.get(task, limits.get("text", params.max_new_tokens)),
                                              params.max_new_tokens))
