"""The two-stage page parse: layout detection, then recognition per detected block.

Stage 1 decodes the whole page with the backend's layout prompt; the backend parses the answer into
regions (for MinerU models: models/mineru_common/layout.py). Stage 2 decodes each block with the
prompt for its type. Both stages land in one Trace: region 0 is the layout pass (kind "layout"),
then one region per detected block with its page box and type, so the app can draw the boxes and
replay both stages on one clock.
"""

from __future__ import annotations

from dataclasses import replace

from models.base import LayoutParser
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.observers import ProgressFn
from mudiff_viz.decoding.sequential import Decode, decode_sequential, merge_traces
from mudiff_viz.decoding.settings import RELEASE_TASK_TOKENS
from mudiff_viz.inputs.page import Page


def decode_two_stage(
    backend: LayoutParser, page: Page, decode: Decode, params, progress: ProgressFn | None = None,
    layout_prompt: str = "detection", snapshot=None,
) -> Trace:
    """Layout pass (asked with ``layout_prompt``), then recognition of every detected block; one Trace."""
    if not isinstance(backend, LayoutParser):
        raise UserInputError(f"layout mode needs a model with a layout prompt (MinerU); {backend.name} has none")
    def task_of(region) -> str:
        return backend.task_of(region.prompt) if hasattr(backend, "task_of") else "text"

    layout_trace = decode(backend, page, [backend.layout_region(page, layout_prompt)], pass_params(params, "layout"),
                          None)
    blocks = backend.parse_layout(layout_trace.regions[0].text, page)
    region_tasks = ["layout"] + [None if b.meta.get("skip") else task_of(b) for b in blocks]
    tasks = [t for t in region_tasks if t is not None]
    extra = {"mode": "layout", "layout_prompt": layout_prompt, "layout_blocks": len(blocks),
             "layout_continues": [i + 1 for i, b in enumerate(blocks) if b.meta.get("continues")],
             "task_tokens": {t: pass_params(params, t).max_new_tokens for t in dict.fromkeys(tasks)},
             "region_tasks": region_tasks}
    if not blocks:
        return merge_traces([layout_trace], extra_params=extra)
    return decode_sequential(backend, page, blocks, decode, params, progress, before=[layout_trace], extra_params=extra,
                             snapshot=snapshot, params_for=lambda region: pass_params(params, task_of(region)))


def pass_params(params, task: str):
    """One pass's params: max_new_tokens is the ceiling of every pass; with ``task_limits``
    "release" each task also stays within the release's own tokens for it (RELEASE_TASK_TOKENS:
    under the release preset's 4096, layout and tables 2048, text and formulas 1024)."""
    if params.task_limits != "release":
        return params
    return replace(params, max_new_tokens=min(RELEASE_TASK_TOKENS.get(task, RELEASE_TASK_TOKENS["text"]),
                                              params.max_new_tokens))
