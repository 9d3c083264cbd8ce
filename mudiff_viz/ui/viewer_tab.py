"""The Trace viewer tab: replay saved traces with no model (one, or an AR + diffusion pair)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import gradio as gr

from mudiff_viz.core.errors import ModelLoadError, UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.inputs.pages import load_page
from mudiff_viz.probes.replay import page_for_trace
from mudiff_viz.ui.capacity import LIGHT_SLOTS, LIGHT_WORK
from mudiff_viz.ui.animation import animation_row, remember_page
from mudiff_viz.ui.common import PAGE_TYPES, example_traces, file_path, one_line, request_dir, user_errors, write_text
from mudiff_viz.ui.links import link_name, with_link
from mudiff_viz.ui.player import Player
from mudiff_viz.ui.results import cleared, failed, files, ordered, plot, says_why, shows_failure, warning_update
from mudiff_viz.ui.slot import trims_after
from mudiff_viz.views import figures, tables
from mudiff_viz.views.export import standalone_compare_html, standalone_html_from_payload, trace_title
from mudiff_viz.views.page_image import image_data_url
from mudiff_viz.views.player import compare_payload, player_payload
from mudiff_viz.views.warnings import alignment_notes

OUTPUTS = ("status", "warning", "player", "fig_order", "fig_conf", "fig_tpf", "downloads", "table", "fig_wall")
# a trace that does not load: its reason once, in the status line; the player only points at it
NOT_LOADED = "The trace could not be loaded"
NOT_LOADED_PLAYER = "No trace loaded: the reason is above."
LOG = logging.getLogger(__name__)


def image_for(trace: Trace, page_file) -> str | None:
    """The page under a loaded trace: the uploaded page if it matches, else a bundled sample by hash."""
    path = file_path(page_file)
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


def trace_outputs(traces: list[Trace], images: list[str | None], paths: list[str]) -> dict:
    """One trace as the Decode tab shows it; two as a pair on one clock with a metrics table."""
    outdir = request_dir()
    if len(traces) == 1:
        (t,), (img,) = traces, images
        remember_page(paths[0], img)
        payload = with_link(player_payload(t, image_url=img), {"trace": link_name(paths[0])})
        html_path = write_text(standalone_html_from_payload(payload, trace_title(t)), outdir, "replay.html")
        notes = "".join(f"  \n⚠ {n}" for n in alignment_notes(t))
        return {
            "status": tables.summary_markdown(t) + notes, "warning": warning_update([t]), "player": payload,
            "fig_order": plot(figures.order_or_drafts(t)), "fig_conf": plot(figures.confidence_histogram([t])),
            "fig_tpf": plot(figures.tokens_per_forward([t])), "downloads": files([*paths, html_path]),
            "table": gr.update(visible=False), "fig_wall": gr.update(visible=False),
        }
    (a, ia, pa), (b, ib, pb) = sorted(zip(traces, images, paths), key=lambda x: x[0].decoder != "ar")  # AR first
    remember_page(pa, ia), remember_page(pb, ib)
    payload = with_link(compare_payload([player_payload(a, image_url=ia), player_payload(b, image_url=ib)]),
                        {"trace": f"{link_name(pa)},{link_name(pb)}"})
    headers, rows = tables.metrics_table([a, b])
    html_path = write_text(standalone_compare_html([a, b], [ia, ib], "AR vs diffusion"), outdir, "compare.replay.html")
    fig_wall, title = figures.untitled(figures.progress_curves([a, b], "wall"))
    return {
        "status": "  \n".join([tables.summary_markdown(a), tables.summary_markdown(b),
                                *(f"⚠ {n}" for n in alignment_notes(a) + alignment_notes(b))]),
        "warning": warning_update([a, b]), "player": payload,
        "fig_order": plot(figures.commit_order_heatmap(b if b.decoder == "diffusion" else a)),
        "fig_conf": plot(figures.confidence_histogram([a, b])), "fig_tpf": plot(figures.tokens_per_forward([a, b])),
        "downloads": files([pa, pb, html_path]),
        "table": gr.update(value=rows, headers=headers, visible=True),
        "fig_wall": gr.update(value=fig_wall, label=title, show_label=True, visible=True),
    }


def replay(paths: list[str], page_file=None) -> dict:
    if not paths:
        raise UserInputError("upload a trace JSON file (from the Decode tab's download or python -m mudiff_viz decode)")
    if len(paths) > 2:
        raise UserInputError(f"upload one trace, or two to compare; got {len(paths)} files")
    traces = [Trace.load(p) for p in paths]
    return trace_outputs(traces, [image_for(t, page_file) for t in traces], paths)


def traces_frames(files, page_file=None):
    """The frames of a replay: a cleared screen saying it loads, then the trace(s)."""
    yield ordered(cleared(OUTPUTS, "Loading the trace…", "Loading the trace…"), OUTPUTS)
    paths = [p for p in ([file_path(f) for f in files] if isinstance(files, (list, tuple)) else [file_path(files)]) if p]
    yield ordered(replay(paths, page_file), OUTPUTS)


@user_errors
@trims_after
@shows_failure(OUTPUTS, NOT_LOADED, NOT_LOADED_PLAYER)
def view_traces(files, page_file=None):
    """Replay one saved trace, or two (AR + diffusion) on one clock; no model is loaded."""
    yield from traces_frames(files, page_file)


@trims_after
def show_upload(files, page_file=None):
    """A dropped trace file, replayed at once. A file that does not load leaves its reason in the
    status line and raises nothing: a toast on top would say it a second time (and the Replay
    button, pressed next, a third)."""
    try:
        yield from traces_frames(files, page_file)
    except Exception as exc:  # the visitor's file, in one line; a real bug also keeps its traceback in the log
        if not isinstance(exc, (UserInputError, ModelLoadError)):
            LOG.exception("the Trace viewer failed on an upload")
        yield ordered(failed(OUTPUTS, one_line(exc), NOT_LOADED, NOT_LOADED_PLAYER), OUTPUTS)


@user_errors
@trims_after
@shows_failure(OUTPUTS, NOT_LOADED, NOT_LOADED_PLAYER)
def view_example(kind: str = "diffusion"):
    """A bundled example trace ("diffusion", "ar") or the AR + diffusion pair ("compare")."""
    ex = example_traces()
    files = ex["ar"][:1] + ex["diffusion"][:1] if kind == "compare" else ex.get(kind, [])[:1]
    if not files:
        raise UserInputError("no bundled example traces: run python scripts/make_example_traces.py")
    yield ordered(replay(files), OUTPUTS)


def example_diffusion():
    """The Example: diffusion trace button (a named generator: Gradio streams it and the API names it)."""
    yield from view_example("diffusion")


def example_compare():
    """The Example: AR vs diffusion button."""
    yield from view_example("compare")


@dataclass
class ViewerTab:
    outputs: list  # in OUTPUTS order


def build() -> ViewerTab:
    gr.Markdown("Replay a saved trace with no model loaded: one trace, or two (AR + diffusion of the same page) to "
                "play them on one clock. Traces made from a bundled sample find their page image automatically.",
                elem_classes="mudiff-note")
    with gr.Row(equal_height=False):
        files = gr.File(label="Trace JSON (one, or two to compare)", file_count="multiple", file_types=[".json"],
                        elem_id="trace-upload", height=120, scale=3)
        page = gr.File(label="Page image or PDF (optional: for traces of your own pages)", file_types=PAGE_TYPES,
                       height=120, scale=2)
        with gr.Column(scale=2, min_width=220):
            replay_btn = gr.Button("Replay", variant="primary", elem_id="trace-replay")
            ex_d = gr.Button("Example: diffusion trace", elem_id="trace-example-diffusion")
            ex_c = gr.Button("Example: AR vs diffusion", elem_id="trace-example-compare")
    status = gr.Markdown(elem_id="viewer-status")
    warning = gr.Markdown(visible=False, elem_classes="mudiff-warning")
    player = Player(elem_id="viewer-player")
    downloads = gr.File(label="Downloads: the trace(s) and an offline replay (HTML)", file_count="multiple",
                        interactive=False, visible=False, elem_id="viewer-downloads")
    animation_row("viewer", downloads)
    table = gr.Dataframe(headers=["metric", "AR", "diffusion"], label="Metrics", interactive=False, visible=False, wrap=True)
    fig_wall = gr.Plot(show_label=False, visible=False)
    with gr.Accordion("Whole-run figures", open=True):
        fig_order = gr.Plot(show_label=False, visible=False)
        with gr.Row():
            fig_conf = gr.Plot(show_label=False, visible=False)
            fig_tpf = gr.Plot(show_label=False, visible=False)
    outputs = says_why([status, warning, player, fig_order, fig_conf, fig_tpf, downloads, table, fig_wall])
    light = {"concurrency_id": LIGHT_WORK, "concurrency_limit": LIGHT_SLOTS}  # no model: never behind a decode
    replay_btn.click(view_traces, [files, page], outputs, api_name="view_trace", scroll_to_output=True, **light)
    files.upload(show_upload, [files, page], outputs, api_visibility="private", **light)
    ex_d.click(example_diffusion, None, outputs, api_name="view_example", scroll_to_output=True, **light)
    ex_c.click(example_compare, None, outputs, api_visibility="private", scroll_to_output=True, **light)
    return ViewerTab(outputs)
