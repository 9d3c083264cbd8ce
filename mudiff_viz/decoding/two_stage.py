"""The two-stage page parse the MinerU models are used for: layout detection, then recognition per block.

Stage 1 decodes the whole page with the layout prompt; its answer is parsed into regions
(models.mineru_common.layout). Stage 2 decodes each block with the prompt for its type. Both stages land in
one Trace: region 0 is the layout pass (kind "layout"), then one region per detected block with its
page box and type, so the app can draw the boxes and replay both stages on one clock.
"""

from __future__ import annotations

from collections.abc import Callable

from models.mineru_common.tasks import DEFAULT_LAYOUT_PROMPT, LAYOUT_PROMPTS, layout_region

from mudiff_viz.core.errors import UserInputError
from models.mineru_common.layout import parse_layout
from mudiff_viz.inputs.pages import Page
from mudiff_viz.decoding.sequential import Decode, decode_sequential, merge_traces
from mudiff_viz.core.trace import Trace


def decode_two_stage(
    backend, page: Page, decode: Decode, params, progress: Callable[[int, int], None] | None = None,
    layout_prompt: str = DEFAULT_LAYOUT_PROMPT,
) -> Trace:
    """Layout pass (asked with ``layout_prompt``: "detection" or "analysis"), then recognition of
    every detected block; one merged Trace."""
    if layout_prompt not in LAYOUT_PROMPTS:
        raise UserInputError(f"layout prompt must be one of {', '.join(LAYOUT_PROMPTS)}, got {layout_prompt!r}")
    if not getattr(backend, "supports_layout", False):
        raise UserInputError(
            f"layout mode needs a MinerU model; {getattr(backend, 'name', 'this model')} has no layout prompt"
        )
    layout_trace = decode(backend, page, [layout_region(page.width, page.height, layout_prompt)], params, None)
    blocks = parse_layout(layout_trace.regions[0].text, page.width, page.height)
    extra = {"mode": "layout", "layout_prompt": layout_prompt, "layout_blocks": len(blocks)}
    if not blocks:
        return merge_traces([layout_trace], extra_params=extra)
    return decode_sequential(
        backend,
        page,
        blocks,
        decode,
        params,
        progress,
        before=[layout_trace],
        extra_params=extra,
    )
