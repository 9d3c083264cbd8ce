"""The Compare tab: the same page through the AR and the diffusion twin, played on one clock."""

from __future__ import annotations

import uuid

import gradio as gr

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.probes.apply import probe_spec
from mudiff_viz.probes.replay import page_for_trace
from mudiff_viz.ui import controls, jobs, models, results
from mudiff_viz.ui.common import example_traces, user_errors
from mudiff_viz.ui.decode_tab import prepare_page
from mudiff_viz.ui.player import Player
from mudiff_viz.ui.slot import MODEL_WORK
from mudiff_viz.views import tables
from mudiff_viz.views.page_image import image_data_url


def _progress(progress, who: str):
    unit = "tokens" if who == "AR" else "blocks"

    def cb(done: int, total: int) -> None:
        progress((done, total), desc=f"{who}: {unit} {done}/{total}", unit=unit)

    return cb


@user_errors
@results.shows_failure(results.COMPARE_OUTPUTS)
def run_compare(file, page_number, spec_diffusion, spec_ar, knobs: dict, occlude_words="", occlude_fraction=0.0,
                degrade_dpi=150, blur=0.0, noise=0.0, jpeg=0, rotate=0.0, probe_seed=0, progress=gr.Progress()):
    """AR then diffusion on one page; yields a cleared screen, each decode as it grows, then both."""
    names = results.COMPARE_OUTPUTS
    yield results.ordered(results.cleared(names, "Decoding with AR, then diffusion…", "Decoding: AR first, then diffusion."),
                          names)
    probes = probe_spec(occlude_words, occlude_fraction, degrade_dpi, blur, noise, jpeg, rotate, probe_seed)
    spec_ar, spec_diffusion = spec_ar or "nano", spec_diffusion or "nano"
    models.check(spec_ar, "ar")
    models.check(spec_diffusion, "diffusion")
    progress(0, desc="loading the page")
    page = prepare_page(file, page_number, probes)
    image = image_data_url(page.image)
    stream = uuid.uuid4().hex[:12]
    progress(0, desc="loading the models and encoding the page (prefill)")
    ar = diff = None
    if jobs.ON_ZERO_GPU:  # one pickled GPU call for both decodes: no frames on the way
        ar, diff = jobs.compare_job(page, spec_ar, spec_diffusion, knobs)
        yield results.ordered(results.compare_result(ar, diff, image, image, probes, stream=stream), names)
        return
    for done, ar in jobs.streamed(lambda snap: jobs.decode_job(page, spec_ar, "ar", knobs, _progress(progress, "AR"), snap)):
        if not done:
            yield results.ordered({"player": results.compare_panes(ar, None, image, image, partial="ar", stream=stream),
                                   "status": f"AR: {ar.n_tokens} tokens so far…"}, names)
    for done, diff in jobs.streamed(lambda snap: jobs.decode_job(page, spec_diffusion, "diffusion", knobs,
                                                                 _progress(progress, "diffusion"), snap)):
        if not done:
            yield results.ordered({"player": results.compare_panes(ar, diff, image, image, partial="diffusion", stream=stream),
                                   "status": f"AR done ({ar.n_tokens} tokens); diffusion: {diff.n_tokens} tokens so far…"},
                                  names)
    yield results.ordered(results.compare_result(ar, diff, image, image, probes, stream=stream), names)


def _trace_image(trace: Trace) -> str | None:
    img = page_for_trace(trace.page)
    return image_data_url(img) if img is not None else None


@user_errors
def compare_examples():
    """The bundled AR + diffusion traces in the Compare view (no model needed)."""
    ex = example_traces()
    if not ex["ar"] or not ex["diffusion"]:
        raise UserInputError("no bundled example traces: run python scripts/make_example_traces.py")
    ar, diff = Trace.load(ex["ar"][0]), Trace.load(ex["diffusion"][0])
    return results.ordered(results.compare_result(ar, diff, _trace_image(ar), _trace_image(diff)), results.COMPARE_OUTPUTS)


def build(default: str | None, model_choices: list[tuple[str, str]]) -> dict:
    knobs = controls.Knobs("compare")
    with gr.Row(equal_height=False):
        picker = controls.page_picker("compare", default)
        with gr.Column(scale=5, min_width=320):
            with gr.Row():
                model_d = gr.Dropdown(model_choices, value=model_choices[0][1], label="Diffusion model")
                model_a = gr.Dropdown(model_choices, value=model_choices[0][1], label="AR model")
            controls.diffusion_knobs(knobs, suffix=" (diffusion)")
            controls.max_tokens_control(knobs)
            perturb = controls.perturb_panel("compare")
            with gr.Row():
                run = gr.Button("Run AR and diffusion", variant="primary", elem_id="compare-run", scale=3)
                example = gr.Button("Load the bundled example pair (no model)", elem_id="compare-example", scale=2)
    status = gr.Markdown(elem_id="compare-status")
    warning = gr.Markdown(visible=False, elem_id="compare-warning", elem_classes="mudiff-warning")
    player = Player(elem_id="compare-player")
    table = gr.Dataframe(headers=["metric", "AR", "diffusion"], label="Metrics", interactive=False, wrap=True,
                         elem_id="compare-table")
    gr.Markdown(tables.ORDER_NOTE, elem_classes="mudiff-note")
    diff_note = gr.Markdown(elem_classes="mudiff-note")
    with gr.Row():
        with gr.Column(min_width=280):
            gr.Markdown("**AR against the ground truth**")
            diff_ar = gr.HTML(elem_id="compare-diff-ar")
        with gr.Column(min_width=280):
            gr.Markdown("**Diffusion against the ground truth**")
            diff_d = gr.HTML(elem_id="compare-diff-diffusion")
    with gr.Accordion("Whole-run figures", open=True):
        with gr.Row():
            fig_fwd = gr.Plot(show_label=False, visible=False)
            fig_wall = gr.Plot(show_label=False, visible=False)
        with gr.Row():
            fig_conf = gr.Plot(show_label=False, visible=False)
            fig_order = gr.Plot(show_label=False, visible=False)
    files = gr.File(label="Downloads: both traces and an offline replay (HTML)", file_count="multiple", interactive=False,
                    elem_id="compare-downloads", visible=False)

    controls.wire_picker(picker, perturb)
    outputs = results.says_why([status, warning, player, table, diff_note, diff_ar, diff_d, fig_fwd, fig_wall, fig_conf,
                                fig_order, files])
    inputs = [picker.file, picker.number, model_d, model_a, *knobs.values(), *perturb.inputs]
    run.click(controls.with_knobs(run_compare, 4, knobs.names()), inputs, outputs, concurrency_id=MODEL_WORK,
              concurrency_limit=1, api_name="compare", scroll_to_output=True, show_progress="minimal")
    example.click(compare_examples, None, outputs, api_name="compare_examples", scroll_to_output=True)
    return {"picker": picker, "run": run}
