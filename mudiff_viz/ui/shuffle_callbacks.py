"""Callbacks of the Semantic Shuffle tab (our reconstruction): wiring only.

The shuffle and the four decodes live in :mod:`mudiff_viz.probes.pairs`, the benchmark in
:mod:`mudiff_viz.probes.bench`, every table and payload in :mod:`mudiff_viz.views.shuffle`. Model
work runs in :func:`shuffle_job` / :func:`bench_job`: one decorated call each (ZeroGPU), holding the
process's model slot.
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import current as current_limits
from mudiff_viz.decoding.pipeline import make_params
from mudiff_viz.inputs.pages import load_page, read_source
from mudiff_viz.probes.bench import bench_pages_from_paths, run_shuffle_benchmark, summary_lines, write_outputs
from mudiff_viz.probes.pairs import DECODERS, ShufflePages, decode_grid, score_grid, shuffle_pages
from mudiff_viz.probes.replay import file_sha256, find_source
from mudiff_viz.ui import models
from mudiff_viz.ui.callbacks import _outdir, _path, _stem, _write_trace, knobs_dict, sample_paths, user_errors
from mudiff_viz.ui.gpu import ON_ZERO_GPU, gpu
from mudiff_viz.ui.slot import model_slot
from mudiff_viz.views import shuffle as views
from mudiff_viz.views.page_image import image_data_url

BENCH_LEVELS = (0.0, 0.25, 0.5, 1.0)


def sidecar_text(path: str) -> str | None:
    """Ground truth for an image page: the ``<stem>.txt`` beside the bundled sample with the same
    bytes (Gradio hands the callback a copy in its cache, so the match is by SHA-256)."""
    source = find_source(file_sha256(path))
    if source is None:
        return None
    txt = source.with_suffix(".txt")
    return txt.read_text(encoding="utf-8", errors="replace") if txt.is_file() else None


@model_slot
@gpu
def shuffle_job(pages: ShufflePages, spec: str, knobs: dict, progress=None) -> dict:
    """Both decoders on both pages: four traces keyed (decoder, column)."""

    for decoder in DECODERS:
        models.check(spec, decoder)
    params = {d: make_params(**knobs) for d in DECODERS}
    return decode_grid(pages, {d: spec for d in DECODERS}, params, progress)


def _bench_job(pages, levels, seeds: int, spec: str, knobs: dict, progress=None):
    for decoder in DECODERS:
        models.check(spec, decoder)
    return run_shuffle_benchmark(pages, levels=levels, seeds=seeds, model=spec, progress=progress, knobs=knobs)


bench_job = model_slot(gpu(_bench_job, duration=600))


def _grid_progress(progress):
    """Progress of the four decodes as one bar: decode k of 4, then its own blocks or tokens."""
    state = {"k": 0, "what": None}

    def cb(done: int, total: int, what: str) -> None:
        if what != state["what"]:
            state["what"], state["k"] = what, state["k"] + 1
        unit = "tokens" if what.startswith("AR") else "blocks"
        frac = (state["k"] - 1 + done / max(1, total)) / 4
        progress(frac, desc=f"decode {state['k']} of 4: {what} ({unit} {done}/{total})")

    return cb


@user_errors
def run_shuffle(file, page_number, level, seed, spec, block_length, steps, threshold, max_tokens,
                progress=gr.Progress()):
    """Shuffle one page and decode both pages with both decoders; the grid, scores, diffs, files."""

    path = _path(file)
    if not path:
        raise UserInputError("choose a page first: upload a PDF, PNG or JPEG, or pick a bundled sample")
    limits = current_limits()
    index = max(0, int(page_number or 1) - 1)
    progress(0, desc="checking the page")
    load_page(path, page_index=index, limits=limits)  # every upload check, rendered in the isolated worker
    data, _ = read_source(path, limits)
    progress(0, desc=f"shuffling at level {float(level):g}")
    pages = shuffle_pages(data, float(level), int(seed or 0), page_index=index, gt_text=sidecar_text(path), limits=limits,
                          name=Path(path).name)
    knobs = knobs_dict(block_length, steps, threshold, 0.0, "low_confidence_dynamic", int(seed or 0), max_tokens)
    progress(0, desc="loading the models and encoding the pages")
    traces = shuffle_job(pages, spec or "nano", knobs, None if ON_ZERO_GPU else _grid_progress(progress))
    return shuffle_outputs(pages, traces, Path(path).name)


def shuffle_outputs(pages: ShufflePages, traces: dict, name: str):
    """Status, grid payload, score table, four diffs, downloads (shuffled page + four traces)."""
    scores = score_grid(traces, pages)
    images = {col: image_data_url(pages.page(col).page.image) for col in ("original", "shuffled")}
    headers, rows = views.score_table(scores, pages.level)
    outdir = _outdir()
    stem = _stem(name)
    shuffled_file = outdir / f"{stem}.shuffled-{pages.level:g}-seed{pages.seed}.{pages.shuffled.result.kind}"
    shuffled_file.write_bytes(pages.shuffled.result.data)
    files = [str(shuffled_file)]
    for decoder, column in views.GRID:
        files.append(_write_trace(traces[(decoder, column)], outdir, f"{stem}.{column}"))
    diffs = views.pane_diffs(traces, {col: pages.page(col).gt_text for col in ("original", "shuffled")})
    return (
        views.summary_markdown(scores, pages.level, pages.seed, pages.lines_changed, pages.lines_total),
        views.grid_payload(traces, images, pages.level),
        gr.update(value=rows, headers=headers),
        *diffs,
        files,
    )


def bundled_bench_pages():
    """The bundled samples as benchmark inputs (our own files: rendered in-process)."""

    pages = bench_pages_from_paths(sample_paths())
    for p in pages:
        p.trusted = True
    return pages


@user_errors
def run_shuffle_bench(levels, seeds, spec, block_length, steps, threshold, max_tokens, progress=gr.Progress()):
    """The benchmark over the bundled samples: summary, figure, table, downloads."""

    chosen = sorted({float(v) for v in (levels or [])})
    if not chosen:
        raise UserInputError("tick at least one shuffle level")
    progress(0, desc="loading the bundled samples")
    pages = bundled_bench_pages()
    knobs = knobs_dict(block_length, steps, threshold, 0.0, "low_confidence_dynamic", 0, max_tokens)
    cb = None if ON_ZERO_GPU else (lambda done, total, msg: progress((done, total), desc=msg, unit="decodes"))
    result = bench_job(pages, chosen, int(seeds or 1), spec or "nano", knobs, cb)
    paths = write_outputs(result, _outdir() / "shuffle-bench")
    headers, rows = views.bench_table(result.summary)
    n_dec = sum(1 for r in result.rows if not r["reused"])
    text = (f"**Semantic Shuffle benchmark** ({views.RECONSTRUCTION}): {len(pages)} bundled pages x "
            f"{int(seeds or 1)} seed(s) x levels {', '.join(f'{v:g}' for v in chosen)}; {n_dec} decodes "
            "(identical level-0 pages are decoded once).  \n" + "  \n".join(summary_lines(result.summary)))
    return (text, gr.update(value=result.figure, visible=True), gr.update(value=rows, headers=headers, visible=True),
            gr.update(value=[str(p) for p in paths.values()], visible=True))
