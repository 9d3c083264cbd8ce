"""One decode request end to end: page -> regions -> decoder -> Trace. Shared by CLI, app and bench."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Callable

from mudiff_viz.decoding.autoregressive import ARParams, decode_autoregressive
from mudiff_viz.decoding.diffusion import DiffusionParams, decode_diffusion
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits, current
from mudiff_viz.inputs.pages import Page
from mudiff_viz.core.trace import Trace

DECODERS = ("diffusion", "ar")
MODES = ("page", "layout")  # layout: the two-stage parse of the MinerU models (mudiff_viz.decoding.two_stage)


def make_params(decoder: str, limits: Limits | None = None, **knobs) -> DiffusionParams | ARParams:
    """Decoder parameters from keyword knobs (ones the decoder lacks are ignored), within limits."""
    cls = DiffusionParams if decoder == "diffusion" else ARParams
    names = {f.name for f in fields(cls)}
    params = cls(**{k: v for k, v in knobs.items() if k in names and v is not None})
    params.check()  # bad knobs fail before any model is loaded
    limits = limits or current()
    if params.max_new_tokens > limits.max_new_tokens:
        raise UserInputError(f"max new tokens {params.max_new_tokens} exceeds the limit of {limits.max_new_tokens}")
    if params.max_seconds is None:
        params.max_seconds = limits.max_decode_seconds
    return params


def decode_page(
    page: Page,
    model: str = "nano",
    decoder: str = "diffusion",
    params: DiffusionParams | ARParams | None = None,
    progress: Callable[[int, int], None] | None = None,
    backend=None,
    mode: str = "page",
    layout_prompt: str = "detection",
) -> Trace:
    """Decode a loaded page with the given model and decoder.

    ``mode`` "page" decodes the model's own regions (text lines for nano, the whole page for the
    real models); "layout" runs layout detection (asked with ``layout_prompt``, one of the release's
    two wordings), then recognition per detected block.
    """
    if decoder not in DECODERS:
        raise UserInputError(f"decoder must be one of {', '.join(DECODERS)}, got {decoder!r}")
    if mode not in MODES:
        raise UserInputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if backend is None:
        from models.registry import load_backend

        backend = load_backend(model, decoder)
    params = params or make_params(decoder)
    cap = getattr(backend, "max_answer", None)  # e.g. one text line for the nano models
    if cap and params.max_new_tokens > cap:
        params = replace(params, max_new_tokens=cap)
    decode = decode_diffusion if decoder == "diffusion" else decode_autoregressive
    if mode == "layout":
        from mudiff_viz.decoding.two_stage import decode_two_stage

        return decode_two_stage(backend, page, decode, params, progress, layout_prompt=layout_prompt)
    regions = backend.regions(page)
    if not regions:
        raise UserInputError("no text found on the page")
    if getattr(backend, "one_region_at_a_time", False) and len(regions) > 1:
        from mudiff_viz.decoding.sequential import decode_sequential

        return decode_sequential(backend, page, regions, decode, params, progress)
    return decode(backend, page, regions, params, progress)
