"""Gradio callbacks: wiring only. Each one loads inputs, calls the pipeline or a view, returns outputs.

User-facing failures (bad file, missing weights, bad trace) become one-line ``gr.Error`` messages.
Model work runs inside :func:`decode_job` / :func:`compare_job`, wrapped by ``spaces.GPU`` on
ZeroGPU Spaces (plain calls elsewhere); they return Trace objects (picklable CPU data).
"""

from __future__ import annotations

import functools
import html
import re
import tempfile
from pathlib import Path
from typing import Callable

import gradio as gr

from mudiff_viz.core.errors import ModelLoadError, UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.pipeline import decode_page, make_params
from mudiff_viz.inputs.pages import load_page
from mudiff_viz.probes.replay import page_for_trace
from mudiff_viz.ui import models
from mudiff_viz.ui.gpu import ON_ZERO_GPU, gpu
from mudiff_viz.ui.slot import model_slot
from mudiff_viz.views import figures, tables
from mudiff_viz.views.export import standalone_compare_html, standalone_html_from_payload, trace_title
from mudiff_viz.views.markdown import md_text
from mudiff_viz.views.page_image import image_data_url
from mudiff_viz.views.player import compare_payload, player_payload

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "assets" / "samples"
TRACES = ROOT / "assets" / "traces"
PREVIEW_DPI = 60


def error_text(message: str) -> str:
    """A message as gr.Error shows it: Gradio's toast renders HTML (sanitised, but an <img> from a
    trace's field would still load), and messages can quote an upload (a trace's key or value), so
    &, < and > are escaped; the toast then reads exactly like the CLI's line."""
    return html.escape(message, quote=False)


def user_errors(fn: Callable) -> Callable:
    """Turn the project's one-line errors into gr.Error; anything else into a short internal message."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except gr.Error:
            raise
        except (UserInputError, ModelLoadError) as exc:
            raise gr.Error(error_text(str(exc))) from None
        except Exception as exc:  # one line, never a traceback in the UI
            msg = str(exc).splitlines()[0] if str(exc) else ""
            raise gr.Error(error_text(f"internal failure: {type(exc).__name__}: {msg}")) from exc

    return wrapper


def sample_paths() -> list[str]:
    return sorted(str(p) for p in SAMPLES.glob("*") if p.suffix.lower() in (".pdf", ".png", ".jpg", ".jpeg"))


def default_sample() -> str | None:
    preferred = SAMPLES / "courier-short.pdf"
    if preferred.is_file():
        return str(preferred)
    paths = sample_paths()
    return paths[0] if paths else None


def example_traces() -> dict[str, list[str]]:
    """Bundled traces: {'diffusion': [...], 'ar': [...]} by file name (*.diffusion.json, *.ar.json)."""
    out: dict[str, list[str]] = {"diffusion": [], "ar": []}
    for p in sorted(TRACES.glob("*.json")):
        for kind in out:
            if p.name.endswith(f".{kind}.json"):
                out[kind].append(str(p))
    return out


def _stem(name: str) -> str:
    stem = Path(name or "page").stem
    return re.sub(r"[^A-Za-z0-9._-]+", "_", stem)[:60] or "page"


OUT_ROOT = Path(tempfile.gettempdir()) / "mudiff-app"
OUT_MAX_AGE_S = 3600.0  # Gradio copies outputs into its own cache as soon as a callback returns


def prune_outputs(root: Path, max_age_s: float, now: float | None = None) -> int:
    """Delete request folders under ``root`` older than ``max_age_s``; returns how many went.

    Every request writes its downloads to a fresh folder; without this a public app's disk fills up.
    """
    import shutil
    import time

    now = time.time() if now is None else now
    removed = 0
    for d in root.glob("req-*"):
        try:
            if d.is_dir() and now - d.stat().st_mtime > max_age_s:
                shutil.rmtree(d, ignore_errors=True)
                removed += 1
        except OSError:  # another request pruned it first
            continue
    return removed


def _outdir() -> Path:
    OUT_ROOT.mkdir(parents=True, exist_ok=True)
    prune_outputs(OUT_ROOT, OUT_MAX_AGE_S)
    return Path(tempfile.mkdtemp(prefix="req-", dir=OUT_ROOT))


def _path(file) -> str | None:
    if file is None:
        return None
    if isinstance(file, (list, tuple)):
        return _path(file[0]) if file else None
    return getattr(file, "name", None) or (file.get("path") if isinstance(file, dict) else str(file))


# ---- page input -----------------------------------------------------------------------------


@user_errors
def preview_page(file, page_number):
    """A small render of the chosen page, and the page picker's range."""

    path = _path(file)
    if not path:
        return None, gr.update(maximum=1, value=1, interactive=False, label="PDF page"), "Choose a page: upload one or pick a sample below."
    page = load_page(path, page_index=0, dpi=PREVIEW_DPI)
    n = page.page_count
    idx = min(max(1, int(page_number or 1)), n)
    if idx != 1:
        page = load_page(path, page_index=idx - 1, dpi=PREVIEW_DPI)
    text = "text layer: ground truth available" if page.lines else "no text layer: lines are found from the pixels, no CER"
    info = f"**{md_text(Path(path).name)}** · page {idx} of {n} · {text}"
    label = f"PDF page (1 to {n})" if n > 1 else "PDF page"
    return page.image, gr.update(maximum=max(1, n), value=idx, interactive=n > 1, label=label), info


def _load(path: str | None, page_number) -> "object":
    if not path:
        raise UserInputError("choose a page first: upload a PDF, PNG or JPEG, or pick a bundled sample")
    return load_page(path, page_index=max(0, int(page_number or 1) - 1))


def _progress_cb(progress, label: str, unit: str):
    def cb(done: int, total: int) -> None:
        if progress is not None:
            progress((done, total), desc=f"{label}: {unit} {done}/{total}", unit=unit)

    return cb


# ---- model work (one decorated call per request) ------------------------------------------------


@model_slot
@gpu
def decode_job(page, spec: str, decoder: str, knobs: dict, progress=None) -> Trace:
    models.check(spec, decoder)
    params = make_params(**knobs)
    return decode_page(page, model=spec, decoder=decoder, params=params, progress=progress)


@model_slot
@gpu
def compare_job(page, spec_diffusion: str, spec_ar: str, knobs: dict, progress=None) -> tuple[Trace, Trace]:
    models.check(spec_ar, "ar")
    models.check(spec_diffusion, "diffusion")
    ar = decode_page(page, model=spec_ar, decoder="ar", params=make_params(**knobs),
                     progress=(lambda d, t: progress(d, t, "AR")) if progress else None)
    diff = decode_page(page, model=spec_diffusion, decoder="diffusion", params=make_params(**knobs),
                       progress=(lambda d, t: progress(d, t, "diffusion")) if progress else None)
    return ar, diff


# ---- outputs ------------------------------------------------------------------------------------


def _write_trace(trace: Trace, outdir: Path, stem: str) -> str:
    path = outdir / f"{stem}.{trace.decoder}.trace.json"
    trace.save(path)
    return str(path)


def _write_html(text: str, outdir: Path, name: str) -> str:
    path = outdir / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def single_outputs(trace: Trace, image_url: str | None):
    """Status, player payload, three whole-run figures, downloads [trace JSON, offline replay HTML]."""
    payload = player_payload(trace, image_url=image_url)
    outdir = _outdir()
    stem = _stem(trace.page.source or "page")
    trace_path = _write_trace(trace, outdir, stem)
    html_path = _write_html(standalone_html_from_payload(payload, trace_title(trace)), outdir, f"{stem}.{trace.decoder}.replay.html")
    return (
        tables.summary_markdown(trace),
        payload,
        figures.commit_order_heatmap(trace),
        figures.confidence_histogram([trace]),
        figures.tokens_per_forward([trace]),
        [trace_path, html_path],
    )


def compare_outputs(ar: Trace, diff: Trace, image_ar: str | None, image_diff: str | None):
    """Status, compare payload, metrics table, two diffs, four figures, downloads."""
    panes = [player_payload(ar, image_url=image_ar, label="AR (one token per forward)"),
             player_payload(diff, image_url=image_diff, label="diffusion (parallel unmasking)")]
    headers, rows = tables.metrics_table([ar, diff])
    outdir = _outdir()
    stem = _stem(diff.page.source or "page")
    files = [_write_trace(ar, outdir, stem), _write_trace(diff, outdir, stem)]
    files.append(_write_html(standalone_compare_html([ar, diff], [image_ar, image_diff], f"{diff.page.source}: AR vs diffusion"),
                             outdir, f"{stem}.compare.replay.html"))
    gt = diff.gt_text if diff.gt_text is not None else ar.gt_text
    if gt is not None:
        diff_ar, diff_d = tables.diff_segments(ar.text, gt), tables.diff_segments(diff.text, gt)
        note = "Differences against the page's text layer (ground truth)."
    else:
        diff_ar, diff_d = [(ar.text, None)], [(diff.text, None)]
        note = "This page has no text layer, so there is no ground truth to diff against: the decoded texts are shown as is."
    status = tables.summary_markdown(ar) + "  \n" + tables.summary_markdown(diff)
    return (
        status,
        compare_payload(panes),
        gr.update(value=rows, headers=headers),
        note,
        diff_ar,
        diff_d,
        figures.progress_curves([ar, diff], "forward"),
        figures.progress_curves([ar, diff], "wall"),
        figures.confidence_histogram([ar, diff]),
        figures.commit_order_heatmap(diff),
        files,
    )


# ---- callbacks ----------------------------------------------------------------------------------


def knobs_dict(block_length, steps, threshold, temperature, strategy, seed, max_tokens) -> dict:
    return {
        "block_length": int(block_length), "steps": int(steps), "threshold": float(threshold),
        "temperature": float(temperature), "strategy": strategy, "seed": int(seed or 0),
        "max_new_tokens": int(max_tokens),
    }


@user_errors
def run_decode(file, page_number, spec, decoder, block_length, steps, threshold, temperature, strategy, seed,
               max_tokens, progress=gr.Progress()):
    progress(0, desc="loading the page")
    page = _load(_path(file), page_number)
    knobs = knobs_dict(block_length, steps, threshold, temperature, strategy, seed, max_tokens)
    progress(0, desc="loading the model and encoding the page (prefill)")
    # the diffusion decoder reports blocks done; the AR decoder tokens done (of the most it may write)
    cb = _progress_cb(progress, "decoding", "blocks" if decoder == "diffusion" else "tokens")
    trace = decode_job(page, spec or "nano", decoder, knobs, None if ON_ZERO_GPU else cb)
    return single_outputs(trace, image_data_url(page.image))


@user_errors
def run_compare(file, page_number, spec_diffusion, spec_ar, block_length, steps, threshold, strategy, max_tokens,
                progress=gr.Progress()):
    progress(0, desc="loading the page")
    page = _load(_path(file), page_number)
    knobs = knobs_dict(block_length, steps, threshold, 0.0, strategy, 0, max_tokens)
    progress(0, desc="loading the models and encoding the page (prefill)")

    def cb(done, total, who):
        unit = "tokens" if who == "AR" else "blocks"
        progress((done, total), desc=f"{who}: {unit} {done}/{total}", unit=unit)

    ar, diff = compare_job(page, spec_diffusion or "nano", spec_ar or "nano", knobs, None if ON_ZERO_GPU else cb)
    url = image_data_url(page.image)
    return compare_outputs(ar, diff, url, url)


def _image_for(trace: Trace, page_file) -> str | None:
    """The page under a loaded trace: the uploaded page if it matches, else a bundled sample by hash."""
    path = _path(page_file)
    if path:

        page = load_page(path, page_index=trace.page.page_index, dpi=float(trace.page.dpi or 150))
        if (page.width, page.height) != (trace.page.width, trace.page.height):
            raise UserInputError(
                f"the page image is {page.width}x{page.height} pixels but the trace was made on a "
                f"{trace.page.width}x{trace.page.height} page: the boxes would not line up"
            )
        return image_data_url(page.image)
    img = page_for_trace(trace.page)
    return image_data_url(img) if img is not None else None


@user_errors
def view_traces(files, page_file=None):
    """Replay one saved trace, or two (AR + diffusion) on one clock; no model is loaded."""
    paths = [p for p in ([_path(f) for f in files] if isinstance(files, (list, tuple)) else [_path(files)]) if p]
    if not paths:
        raise UserInputError("upload a trace JSON file (from the Decode tab's download or python -m mudiff_viz decode)")
    if len(paths) > 2:
        raise UserInputError(f"upload one trace, or two to compare; got {len(paths)} files")
    traces = [Trace.load(p) for p in paths]
    images = [_image_for(t, page_file) for t in traces]
    paths = [p for _, p in sorted(zip(traces, paths), key=lambda tp: tp[0].decoder != "ar")]
    if len(traces) == 1:
        out = single_outputs(traces[0], images[0])
        return out + (gr.update(visible=False), gr.update(visible=False))
    traces_imgs = sorted(zip(traces, images), key=lambda ti: ti[0].decoder != "ar")  # AR first
    (a, ia), (b, ib) = traces_imgs
    payload = compare_payload([player_payload(a, image_url=ia), player_payload(b, image_url=ib)])
    headers, rows = tables.metrics_table([a, b])
    outdir = _outdir()
    html_path = _write_html(standalone_compare_html([a, b], [ia, ib], "AR vs diffusion"), outdir, "compare.replay.html")
    status = tables.summary_markdown(a) + "  \n" + tables.summary_markdown(b)
    return (
        status, payload,
        figures.commit_order_heatmap(b if b.decoder == "diffusion" else a),
        figures.confidence_histogram([a, b]),
        figures.tokens_per_forward([a, b]),
        [*paths, html_path],
        gr.update(value=rows, headers=headers, visible=True),
        gr.update(value=figures.progress_curves([a, b], "wall"), visible=True),
    )


@user_errors
def view_example(kind: str):
    ex = example_traces()
    if kind == "compare":
        files = ex["ar"][:1] + ex["diffusion"][:1]
    else:
        files = ex.get(kind, [])[:1]
    if not files:
        raise UserInputError("no bundled example traces: run python scripts/make_example_traces.py")
    return view_traces(files)


@user_errors
def compare_examples():
    """The bundled AR + diffusion traces in the Compare view (no model needed)."""
    ex = example_traces()
    if not ex["ar"] or not ex["diffusion"]:
        raise UserInputError("no bundled example traces: run python scripts/make_example_traces.py")
    ar, diff = Trace.load(ex["ar"][0]), Trace.load(ex["diffusion"][0])
    return compare_outputs(ar, diff, _image_for(ar, None), _image_for(diff, None))
