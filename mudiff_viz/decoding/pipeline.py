"""One decode request end to end: page -> regions -> decoder -> Trace. Shared by CLI, app, probes and bench."""

from __future__ import annotations

import functools
from dataclasses import replace

from models.registry import load_backend
from mudiff_viz.core.errors import ModelLoadError, UserInputError
from mudiff_viz.core.limits import Limits, current
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.decoders import Decoder, get_decoder
from mudiff_viz.decoding.observers import ProgressFn, Snapshot
from mudiff_viz.decoding.sequential import decode_sequential
from mudiff_viz.decoding.settings import MODES, DecodeParams, for_weights
from mudiff_viz.decoding.two_stage import decode_two_stage
from mudiff_viz.core.types import Region
from mudiff_viz.inputs.page import Page
from mudiff_viz.inputs.regions import find_regions
from mudiff_viz.inputs.scan import straighten



def make_params(limits: Limits | None = None, **knobs) -> DecodeParams:
    """Decode parameters from keyword knobs, checked, within the limits in force."""
    params = DecodeParams.from_knobs(**knobs)  # bad knobs fail before any model is loaded
    limits = limits or current()
    if params.max_new_tokens > limits.max_new_tokens:
        raise UserInputError(f"max new tokens {params.max_new_tokens} exceeds the limit of {limits.max_new_tokens}")
    if params.max_seconds is None:
        params.max_seconds = limits.max_decode_seconds
    params.token_limit = limits.max_new_tokens
    return params


def regions_for(backend, page: Page) -> list[Region]:
    """The regions a backend decodes: found by mudiff_viz.inputs in the backend's unit, or (for
    a backend without one, the real models' whole page) its own."""
    return find_regions(page, backend.region_unit) if backend.region_unit else backend.regions(page)


def decode_page(
    page: Page,
    model: str = "nano",
    decoder: str = "diffusion",
    params: DecodeParams | None = None,
    progress: ProgressFn | None = None,
    backend=None,
    mode: str | None = None,
    layout_prompt: str = "detection",
    batch_regions: bool | None = None,
    snapshot: Snapshot | None = None,
) -> Trace:
    """Decode a loaded page with the given model and decoder.

    ``mode`` "page" decodes the model's own regions (text blocks for nano, the whole page for the
    real models); "layout" runs layout detection (asked with ``layout_prompt``, one of the
    release's two wordings), then recognition per detected block. ``batch_regions``: decode all
    regions as one batch (None: what the backend does; False: one region at a time, as the real
    model runs, merged onto one clock; True for a real model: its regions, or in mode "layout" its
    detected blocks, as batches; models/base.py ``can_batch_regions``). ``snapshot`` is handed, as
    the decode goes, functions that build the trace so far (a streamed view calls them when it
    wants a frame; a batched two-stage parse streams no frames).

    With the ``straighten`` knob on (the nano pairs' default; the MinerU models see the page as
    their release and client do), a page without a text layer is straightened first (lighting
    flattened, skew turned back: inputs/scan.py); the trace's boxes are on the straightened page
    and ``page.skew`` maps them back onto the uploaded image.
    """
    dec = get_decoder(decoder)
    params = params or make_params()
    mode = mode or params.mode  # the mode knob, unless the caller names one (the trace records it either way)
    if mode not in MODES:
        raise UserInputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != params.mode:
        params = replace(params, more={**params.more, "mode": mode})
    params, shipped = for_weights(params, dec.backend_kind)
    if shipped:  # the preset's values for these weights (an AR model's own client), recorded
        params = replace(params, extra={**params.extra, "preset_for_weights": {"kind": dec.backend_kind, **shipped}})
    backend = backend or load_backend(model, dec.backend_kind)
    run = dec.run
    if dec.roles:
        others = role_backends(dec, model, backend, params)
        run = functools.partial(dec.run, **others)
        backend_limits = [b.max_answer for b in (backend, *others.values()) if b.max_answer]
    else:
        backend_limits = [backend.max_answer] if backend.max_answer else []
    if backend_limits and params.max_new_tokens > min(backend_limits):
        params = replace(params, max_new_tokens=min(backend_limits))
    params = replace(params, more={**params.more, "straighten": wants_straightening(params, backend)})
    if params.straighten:
        page = straighten(page)
    if batch_regions and not (backend.batches_regions or backend.can_batch_regions):
        raise UserInputError(f"{backend.name} decodes one region at a time")
    if mode == "layout":  # the detected blocks as batches only when asked (batch_regions=True)
        return decode_two_stage(backend, page, run, params, progress, layout_prompt=layout_prompt, snapshot=snapshot,
                                batch=bool(batch_regions))
    regions = task_regions(backend, page, params.task) if params.task != "text" else regions_for(backend, page)
    if not regions:
        raise UserInputError("no text found on the page")
    batch = backend.batches_regions if batch_regions is None else batch_regions
    if not batch and len(regions) > 1:
        return decode_sequential(backend, page, regions, run, params, progress, snapshot=snapshot)
    return run(backend, page, regions, params, progress, snapshot=snapshot)


def wants_straightening(params: DecodeParams, backend) -> bool:
    """The ``straighten`` knob, or when it is unset the model's own choice (``Backend.straightens``)."""
    return bool(params.straighten) if params.straighten is not None else bool(getattr(backend, "straightens", True))


def task_regions(backend, page: Page, task: str) -> list[Region]:
    """The whole page read with another task's prompt (MinerU models; the nano pairs read text only)."""
    if not hasattr(backend, "task_region"):
        raise UserInputError(f"{backend.name} reads text only: the {task} task needs a MinerU model")
    return [backend.task_region(page, task)]


def role_backends(dec: Decoder, model: str, backend, params: DecodeParams) -> dict:
    """The backends of a decoder's further roles (the speculative decoder's verifier): the
    ``verifier`` knob's model, else the main model's own twin of that kind. Their tokenizers must
    agree with the main backend's: drafts are token ids."""
    out = {}
    for role, kind in dec.roles.items():
        spec = getattr(params, role, "") or model
        try:
            other = load_backend(spec, kind)
        except ModelLoadError as exc:
            raise UserInputError(f"the {dec.name} decoder needs an {kind.upper()} {role} ({exc}); pass one with --{role}") from None
        if other.vocabulary() != backend.vocabulary():
            raise UserInputError(f"{backend.name} and the {role} {other.name} have different tokenizers: drafts cannot be verified")
        out[role] = other
    return out
