"""The public functions: a page into a Trace, both decoders on one clock, Semantic Shuffle, saved
traces, the model list. ``import mudiff_viz as mv`` exposes them; the CLI's ``decode`` calls
:func:`decode`, so a notebook and the command line take one code path.

Knobs are :data:`mudiff_viz.decoding.settings.KNOBS` (block_length, steps, threshold, strategy,
temperature, top_k, top_p, seed, max_new_tokens), checked by the same ``Knob.check`` as the CLI's,
so a bad value raises the same one-line :class:`UserInputError`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd

from models import registry
from mudiff_viz.core.errors import ModelLoadError, UserInputError
from mudiff_viz.core.limits import Limits, current
from mudiff_viz.core.page_numbers import page_index
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.decoders import get_decoder
from mudiff_viz.decoding.observers import ProgressFn, Snapshot
from mudiff_viz.decoding.pipeline import decode_page, make_params
from mudiff_viz.decoding.settings import KNOB, KNOBS, preset_knobs
from mudiff_viz.inputs.page import Page
from mudiff_viz.inputs.pages import read_source, sniff_kind
from mudiff_viz.notebook import page_images
from mudiff_viz.notebook.comparisons import Comparison, ShuffleComparison
from mudiff_viz.notebook.sources import Source, display_name, is_sample, resolve
from mudiff_viz.probes.apply import ProbeSpec, parse_word_list, probed_page
from mudiff_viz.probes.pairs import DECODERS, decode_grid, score_grid, shuffle_pages
from mudiff_viz.probes.perturb import parse_degrade

__all__ = ["Comparison", "ShuffleComparison", "compare", "decode", "load_trace", "models", "shuffle"]


def check_knobs(knobs: dict[str, Any]) -> dict[str, Any]:
    """Only known knob names, each value checked (the CLI's messages); returns them unchanged."""
    unknown = sorted(set(knobs) - set(KNOB))
    if unknown:
        raise UserInputError(f"unknown knob {unknown[0]!r}; knobs are {', '.join(k.name for k in KNOBS)}")
    for name, value in knobs.items():
        if value is not None:
            KNOB[name].check(value)
    return knobs


def probe_spec(occlude: float | Iterable[int] | str | None = None, degrade: str | dict | None = None,
               probe_seed: int = 0) -> ProbeSpec:
    """``occlude``: a fraction of the words, or word indices (a list or "3,17,20"); ``degrade``:
    "dpi=72,blur=1" or a dict of the same knobs."""
    words = fraction = None
    if isinstance(occlude, str):
        words = parse_word_list(occlude)
    elif isinstance(occlude, (int, float)) and not isinstance(occlude, bool):
        fraction = float(occlude) or None
    elif occlude is not None:
        words = parse_word_list(",".join(str(int(w)) for w in occlude))
    if isinstance(degrade, str):
        degrade = parse_degrade(degrade)
    return ProbeSpec(occlude_words=words, occlude_fraction=fraction, degrade=dict(degrade or {}), seed=int(probe_seed))


def load_page(source: Source | Page, page: int = 1, dpi: float = 150, occlude=None, degrade=None,
              probe_seed: int = 0, limits: Limits | None = None) -> Page:
    """The page the decoders see: page number ``page`` (from 1, as the CLI and the app count),
    loaded, then occluded and degraded when asked (probes/apply.py). A :class:`Page` already loaded
    (the app's, which loaded and probed it itself) is taken as is."""
    if isinstance(source, Page):
        if occlude is not None or degrade is not None:
            raise UserInputError("occlude= and degrade= need the page's file, not a loaded Page")
        return source
    return probed_page(resolve(source), page_index(page), dpi, probe_spec(occlude, degrade, probe_seed), limits or current())


def decode(source: Source | Page, *, model: str = "nano", decoder: str = "diffusion", page: int = 1,
           dpi: float = 150, mode: str | None = None, layout_prompt: str = "detection",
           occlude: float | Iterable[int] | str | None = None, degrade: str | dict | None = None,
           probe_seed: int = 0, record: bool = True, fused: bool = False, limits: Limits | None = None,
           progress: ProgressFn | None = None, snapshot: Snapshot | None = None, preset: str | None = None,
           batch_regions: bool | None = None, **knobs: Any) -> Trace:
    """Decode one page into a Trace (every denoising step recorded unless ``record=False``).

    ``source``: a path, a bundled sample's name ("courier-short"), file bytes or a PIL image.
    ``page``: the page number, from 1 (the trace stores the 0-based ``page.page_index``).
    ``model``: "nano" (the embedded character pair), "nano-subword", a checkpoint directory.
    ``occlude`` / ``degrade`` / ``probe_seed``: the probes of ``decode --occlude/--degrade``.
    ``progress(done, total)`` and ``snapshot(build_trace_so_far)``: live observers (the app streams
    its frames through them; decoding/observers.py).
    ``knobs``: block_length, steps, threshold, strategy, temperature, top_k, top_p, seed,
    max_new_tokens (docs/notebook.md); bad values raise the CLI's one-line errors.
    ``preset="release"``: the release's demo settings under the knobs given (as ``--preset release``).
    ``batch_regions``: None, what the model does; True, a real model's regions (mode "layout": its
    detected blocks) as batches (docs/real-models.md#several-regions-as-one-batch); False, one at a time.
    """
    limits = limits or current()
    params = make_params(limits, **preset_knobs(preset, check_knobs(knobs), limits.max_new_tokens))  # bad knobs fail before any page or model work
    params.record, params.fused = record, fused
    loaded = load_page(source, page, dpi, occlude, degrade, probe_seed, limits)
    trace = decode_page(loaded, model=model, decoder=decoder, params=params, mode=mode, layout_prompt=layout_prompt,
                        progress=progress, snapshot=snapshot, batch_regions=batch_regions)
    page_images.remember(trace, loaded.image)
    return trace


def load_trace(path: str | Path) -> Trace:
    """A saved trace (JSON, version 1 or 2), validated; replays with no model."""
    return Trace.load(path)


def compare(source: Source, *, model: str = "nano", ar_model: str | None = None, page: int = 1, dpi: float = 150,
            occlude=None, degrade=None, probe_seed: int = 0, limits: Limits | None = None, preset: str | None = None,
            also: Sequence[str] = (), rounds: int = 1, **knobs: Any) -> Comparison:
    """AR and diffusion on the same page (AR first, as the app does), then each decoder of ``also``
    (``"self-speculative"``, ``"speculative"``: the diffusion model drafts; the speculative
    decoder's verifier is ``ar_model``, which defaults to ``model``). ``rounds`` > 1 runs them all
    that many times, interleaved (each round starts one decoder on), for the verdict's spread; the
    comparison holds the last round and, in ``rounds``, every round."""
    limits = limits or current()
    params = make_params(limits, **preset_knobs(preset, check_knobs(knobs), limits.max_new_tokens))
    for name in also:
        get_decoder(name)
    if not 1 <= int(rounds) <= 20:
        raise UserInputError(f"rounds must be from 1 to 20, got {rounds}")
    loaded = load_page(source, page, dpi, occlude, degrade, probe_seed, limits)
    ar_spec = ar_model or model
    plan = [("ar", ar_spec, params), ("diffusion", model, params)]
    for name in dict.fromkeys(also):
        if name in ("ar", "diffusion"):
            continue
        own = replace(params, more={**params.more, "verifier": params.verifier or ar_spec}) if name == "speculative" else params
        plan.append((name, model, own))
    done: list[list[Trace]] = []
    for r in range(int(rounds)):
        turn = plan[r % len(plan):] + plan[:r % len(plan)]
        got = {name: decode_page(loaded, model=spec, decoder=name, params=p) for name, spec, p in turn}
        done.append([got[name] for name, _, _ in plan])
    for t in (t for rnd in done for t in rnd):
        page_images.remember(t, loaded.image)
    ar, diffusion, *more = done[-1]
    return Comparison(ar=ar, diffusion=diffusion, also={t.decoder: t for t in more}, rounds=done)


def shuffle(source: Source, *, level: float = 1.0, seed: int = 0, model: str = "nano", ar_model: str | None = None,
            page: int = 1, limits: Limits | None = None, preset: str | None = None, **knobs: Any) -> ShuffleComparison:
    """Semantic Shuffle (our reconstruction, docs/semantic-shuffle.md): words permuted within each
    line at ``level`` (0..1, seeded), the page re-rendered; both pages through both decoders
    (``ar_model`` defaults to ``model``)."""
    limits = limits or current()
    params = {d: make_params(limits, **preset_knobs(preset, check_knobs(knobs), limits.max_new_tokens)) for d in DECODERS}
    resolved = resolve(source)
    data, _ = read_source(resolved, limits)
    gt = None  # a PDF's ground truth is its text layer; an image's, the .txt beside it (as the CLI reads it)
    sidecar = Path(resolved).with_suffix(".txt") if isinstance(resolved, str) else None
    if sidecar is not None and sniff_kind(data) != "pdf" and sidecar.is_file():
        gt = sidecar.read_text(encoding="utf-8", errors="replace")
    pages = shuffle_pages(data, level, seed, page_index=page_index(page), gt_text=gt, trusted=is_sample(resolved), limits=limits,
                          name=display_name(source))
    traces = decode_grid(pages, {"diffusion": model, "ar": ar_model or model}, params)
    for (_, column), trace in traces.items():
        page_images.remember(trace, pages.page(column).page.image)
    return ShuffleComparison(level=pages.level, seed=pages.seed, traces=traces, scores=score_grid(traces, pages),
                             lines_changed=pages.lines_changed, lines_total=pages.lines_total)


def models() -> pd.DataFrame:
    """What ``model=`` can load: the embedded pairs and the ``MUDIFF_MODELS`` checkpoints, with status."""
    rows = []
    for spec in registry.configured_models():
        if spec in registry.SHIPPED:
            twins = [t for t in ("diffusion", "ar") if registry.twin_installed(spec, t)]
            missing = registry.twin_dir(spec, "diffusion").parent
            status = "installed" if len(twins) == 2 else f"weights missing: {missing}"
            rows.append({"spec": spec, "source": "embedded", "weights": registry.SHIPPED[spec],
                         "model_type": f"nano ({', '.join(twins)})", "status": status})
            continue
        path = Path(spec).expanduser()
        if not path.is_dir():  # a hub id is never fetched just to be listed
            rows.append({"spec": spec, "source": "hub id or missing directory", "weights": None, "model_type": None,
                         "status": "not a local directory (a hub id downloads on first use when MUDIFF_ALLOW_HUB=1)"})
            continue
        try:
            rows.append({"spec": spec, "source": "checkpoint", "weights": str(path),
                         "model_type": registry.model_kind(path), "status": "found"})
        except ModelLoadError as exc:
            rows.append({"spec": spec, "source": "checkpoint", "weights": str(path), "model_type": None,
                         "status": str(exc)})
    return pd.DataFrame(rows)
