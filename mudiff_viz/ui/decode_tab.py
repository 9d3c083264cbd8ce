"""The Decode tab: one page, one decoder, every step recorded and played while it decodes."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import gradio as gr

from mudiff_viz.decoding.settings import DIFFUSION, KNOB
from mudiff_viz.probes.apply import probe_spec
from mudiff_viz.ui import controls, hero, jobs, models, precheck, results, setups
from mudiff_viz.ui.animation import animation_row
from mudiff_viz.ui.pagework import prepare_page
from mudiff_viz.ui.common import user_errors
from mudiff_viz.ui.player import Player
from mudiff_viz.ui.capacity import DECODE_SLOTS
from mudiff_viz.ui.slot import MODEL_WORK
from mudiff_viz.views.page_image import image_data_url


def progress_callback(progress, decoder: str):
    unit = "blocks" if decoder == "diffusion" else "tokens"  # diffusion reports blocks done; AR tokens written

    def cb(done: int, total: int) -> None:
        progress((done, total), desc=f"decoding: {unit} {done}/{total}", unit=unit)

    return cb


def check_decode(file, page_number, spec, decoder, knobs: dict, occlude_words="", occlude_fraction=0.0, degrade_dpi=150,
                 blur=0.0, noise=0.0, jpeg=0, rotate=0.0, probe_seed=0) -> None:
    """What run_decode refuses before it needs a model (the Run button's first, model-free step)."""
    probes = precheck.probes_of(occlude_words, occlude_fraction, degrade_dpi, blur, noise, jpeg, rotate, probe_seed)
    precheck.check_page_and_models(file, page_number, {decoder: spec}, probes)


@user_errors
@results.shows_failure(results.DECODE_OUTPUTS)
def run_decode(file, page_number, spec, decoder, knobs: dict, occlude_words="", occlude_fraction=0.0, degrade_dpi=150,
               blur=0.0, noise=0.0, jpeg=0, rotate=0.0, probe_seed=0, progress=gr.Progress(), request: gr.Request = None):
    """Decode one page; yields a cleared screen, then the trace as it grows, then the result (or,
    after Stop, the stopped screen). ``knobs``: every decode knob by name (the tab wires one control
    per knob: controls.with_knobs); ``request``: the browser session its Stop button names."""
    names = results.DECODE_OUTPUTS
    yield results.ordered(results.cleared(names, "Decoding…", "Decoding: the first frame appears after the first denoising step."), names)
    probes = probe_spec(occlude_words, occlude_fraction, degrade_dpi, blur, noise, jpeg, rotate, probe_seed)
    progress(0, desc="loading the page" + (" and applying the probes" if probes.active else ""))
    page = prepare_page(file, page_number, probes)
    image = image_data_url(page.image)
    spec = spec or "nano"
    models.check(spec, decoder)
    stream = uuid.uuid4().hex[:12]
    progress(0, desc="loading the model and encoding the page (prefill)")
    job = (lambda snap: jobs.decode_job(page, spec, decoder, knobs, progress_callback(progress, decoder), snap))
    start, latest, finished = time.monotonic(), None, False
    for done, trace in jobs.streamed(job, tick_s=jobs.TICK_S, session=getattr(request, "session_hash", None)):
        if done:
            finished = True
            yield results.ordered(results.decode_result(trace, image, probes, stream=stream), names)
            continue
        frame = {"status": results.live_status(trace or latest, time.monotonic() - start)}
        if trace is not None:  # a frame, not a tick
            latest = trace
            frame["player"] = results.streaming_frame(trace, image, stream)
        yield results.ordered(frame, names)
    if not finished:  # Stop ended it (jobs.stop_session)
        yield results.ordered(results.stopped(names), names)


@dataclass
class DecodeTab:
    picker: controls.PagePicker
    knobs: controls.Knobs
    decoder: gr.Radio
    model: gr.Dropdown
    run: gr.Button
    inputs: list
    outputs: list


def missing_note() -> str:
    missing = models.missing_twins()
    if not missing:
        return ""
    return ("⚠ " + models.missing_message(missing[0]) +
            " The **Trace viewer** tab replays bundled example traces without any model.")


def real_models_note(model_choices: list[tuple[str, str]]) -> str:
    """One line under the picker when the real models are listed but not set up."""
    waiting = [label.split(" · ")[0] for label, spec in model_choices if spec.startswith(models.SETUP)]
    if not waiting:
        return ""
    return (f"The real models ({', '.join(waiting)}) are listed in the picker: to run them, start the app with "
            "`MUDIFF_MODELS` pointing at a downloaded checkpoint (docs/real-models.md).")


def build(default: str | None, model_choices: list[tuple[str, str]]) -> DecodeTab:
    knobs = controls.Knobs("decode")
    first_model, first_decoder = models.default_choice(model_choices)
    # the showcase plays what the first Run decodes: only when that model is the one offered first
    showcase = hero.hero_payload() if (first_model, first_decoder) == (hero.RUN.family, hero.RUN.decoder) else None
    # the primary action first: on any screen, Run is on the first screenful, the player right beside
    # the page (on a phone, right under Run), every other knob folded away in Advanced settings
    with gr.Row(equal_height=True, elem_id="decode-toolbar"):
        run = gr.Button("Run decode", variant="primary", elem_id="decode-run", scale=1, min_width=150)
        # in Run's place while a decode runs: a second Run click would be dropped without a word
        stop = gr.Button("Stop decode", variant="stop", elem_id="decode-stop", scale=1, min_width=150, visible=False)
        decoder = gr.Radio(controls.decoder_choices(), value=first_decoder, label="Decoder", elem_id="decode-decoder",
                           info=controls.DECODER_INFO, scale=5, min_width=300)
        model = gr.Dropdown(model_choices, value=first_model, label="Model", elem_id="decode-model", scale=3,
                            min_width=260)
    setup_buttons = setups.setup_row("decode")
    note = missing_note() or real_models_note(model_choices)
    gr.Markdown(note, visible=bool(note), elem_classes="mudiff-note", elem_id="decode-model-note")
    with gr.Row(equal_height=False, elem_id="decode-main"):
        with gr.Column(scale=2, min_width=280, elem_id="decode-page-column"):
            with gr.Row():
                picker = controls.page_picker("decode", default, preview_height=300)
        with gr.Column(scale=5, min_width=320, elem_id="decode-player-column"):
            status = gr.Markdown(hero.hero_line(hero.hero_trace()) if showcase else "", elem_id="decode-status")
            warning = gr.Markdown(visible=False, elem_id="decode-warning", elem_classes="mudiff-warning")
            player = Player(value=showcase, elem_id="player")
            downloads = gr.File(label="Downloads: the trace (JSON, replays in the Trace viewer) and an offline replay "
                                "(HTML, opens in any browser)", file_count="multiple", interactive=False,
                                elem_id="decode-downloads", visible=False)
            animation_row("decode", downloads)
    with gr.Accordion("Advanced settings (every knob, presets, page perturbations)", open=False,
                      elem_id="decode-advanced") as advanced:
        diffusion_group = controls.every_knob(knobs)
        perturb = controls.perturb_panel("decode")
    with gr.Accordion("Whole-run figures", open=True):
        fig_order = gr.Plot(show_label=False, elem_id="decode-fig-order", visible=False)
        with gr.Row():
            fig_conf = gr.Plot(show_label=False, elem_id="decode-fig-conf", visible=False)
            fig_tpf = gr.Plot(show_label=False, elem_id="decode-fig-tpf", visible=False)
    diffusion_group.visible = first_decoder == DIFFUSION
    for name in knobs.names():  # offered only where the first decoder reads them (a decoder change redoes this)
        if KNOB[name].decoders != (DIFFUSION,):
            knobs[name].visible = first_decoder in KNOB[name].decoders
    setups.wire(setup_buttons, knobs, decoder)

    controls.wire_picker(picker, perturb, around=[advanced])
    # the modes and tasks that make sense for the chosen model (the nano pairs: page and text), and why
    offer = [knobs["mode"], knobs["task"]]
    controls.offer_modes(knobs, model.value)
    for event in (model.change, knobs["mode"].change):  # a preset button changes the mode too
        event(controls.mode_updates, [model, *offer], offer, queue=False, api_visibility="private")
    shared = [n for n in knobs.names() if KNOB[n].decoders != (DIFFUSION,)]  # the group hides diffusion's own
    decoder.change(lambda d: [gr.update(visible=d == DIFFUSION), *controls.knob_visibility(knobs, d, shared)], decoder,
                   [diffusion_group, *knobs.values(shared)], queue=False, api_visibility="private")
    inputs = [picker.file, picker.number, model, decoder, *knobs.values(), *perturb.inputs]
    outputs = results.says_why([status, warning, player, fig_order, fig_conf, fig_tpf, downloads])
    # a new file clears the last failure: its reason belongs to the old file, not to the preview beside it
    picker.file.change(lambda s: results.failure_cleared(results.DECODE_OUTPUTS, s, "Press Run decode to decode this page."),
                       status, outputs, queue=False, show_progress="hidden", api_visibility="private")
    check = precheck.check_step(results.DECODE_OUTPUTS, controls.with_knobs(check_decode, 4, knobs.names()))
    precheck.checked_then(run, check, controls.with_knobs(run_decode, 4, knobs.names()), inputs, outputs, "decode",
                          stop=stop, stopped=lambda: results.ordered(results.stopped(results.DECODE_OUTPUTS), results.DECODE_OUTPUTS),
                          concurrency_id=MODEL_WORK, concurrency_limit=DECODE_SLOTS, scroll_to_output=True,
                          show_progress="minimal")
    return DecodeTab(picker, knobs, decoder, model, run, inputs, outputs)
