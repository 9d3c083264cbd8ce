"""The Compare tab: the same page through the AR twin, the diffusion twin and a draft-and-verify
decoder, played on one clock."""

from __future__ import annotations

import time
import uuid

import gradio as gr

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.probes.apply import probe_spec
from mudiff_viz.probes.replay import page_for_trace
from mudiff_viz.ui import controls, jobs, models, precheck, results
from mudiff_viz.ui.animation import animation_row
from mudiff_viz.ui.common import example_traces, user_errors, whole_count
from mudiff_viz.ui.pagework import prepare_page
from mudiff_viz.ui.player import Player
from mudiff_viz.ui.capacity import DECODE_SLOTS, LIGHT_SLOTS, LIGHT_WORK
from mudiff_viz.ui.slot import MODEL_WORK
from mudiff_viz.views import tables
from mudiff_viz.views.labels import decoder_label
from mudiff_viz.views.page_image import image_data_url


THIRD_CHOICES = [("self-speculative: the diffusion model drafts and verifies itself", "self-speculative"),
                 ("speculative: the diffusion model drafts, the AR model verifies", "speculative"),
                 ("none: AR and diffusion only", "none")]


def _progress(progress, who: str, unit: str):
    def cb(done: int, total: int) -> None:
        progress((done, total), desc=f"{who}: {unit} {done}/{total}", unit=unit)

    return cb


def compare_plan(spec_diffusion: str, spec_ar: str, third: str) -> list[tuple[str, str, dict]]:
    """The decodes Compare runs, in order: (decoder, model spec, knobs of its own). AR first, then
    diffusion, then the draft-and-verify decoder if one is chosen (its verifier is the AR model)."""
    plan = [("ar", spec_ar, {}), ("diffusion", spec_diffusion, {})]
    if third == "speculative":
        plan.append(("speculative", spec_diffusion, {"verifier": spec_ar}))
    elif third == "self-speculative":
        plan.append(("self-speculative", spec_diffusion, {}))
    elif third not in ("none", "", None):
        raise UserInputError(f"unknown third decoder {third!r}; choose one of self-speculative, speculative, none")
    return plan


ROUNDS = 2  # each decoder twice by default: enough to see a spread, cheap on the embedded pairs
MAX_ROUNDS = 5


def round_count(rounds) -> int:
    """The rounds control as a count, checked (a bad value: a one-line error)."""
    return whole_count(rounds, "rounds", ROUNDS, MAX_ROUNDS)


def interleaved(plan: list, rounds: int) -> list[list]:
    """The plan once per round, each round starting one decoder further on (AR, diffusion, third;
    then diffusion, third, AR; ...): no decoder always runs first, right after the page's load, and
    load that drifts during the run reaches every decoder's spread."""
    n = len(plan)
    return [plan[r % n:] + plan[:r % n] for r in range(rounds)]


def in_plan_order(traces: list[Trace], plan: list) -> list[Trace]:
    """A round's traces in the plan's order (AR first), whatever order they ran in."""
    rank = {decoder: i for i, (decoder, _, _) in enumerate(plan)}
    return sorted(traces, key=lambda t: rank.get(t.decoder, len(rank)))


def check_compare(file, page_number, spec_diffusion, spec_ar, third, knobs: dict, occlude_words="", occlude_fraction=0.0,
                  degrade_dpi=150, blur=0.0, noise=0.0, jpeg=0, rotate=0.0, probe_seed=0, rounds=ROUNDS) -> None:
    """What run_compare refuses before it needs a model (the Run button's first, model-free step)."""
    round_count(rounds)
    probes = precheck.probes_of(occlude_words, occlude_fraction, degrade_dpi, blur, noise, jpeg, rotate, probe_seed)
    plan = compare_plan(spec_diffusion or "nano", spec_ar or "nano", third)
    precheck.check_page_and_models(file, page_number, {decoder: spec for decoder, spec, _ in plan}, probes)


RUN_LABEL = "Run AR, diffusion and draft-and-verify"


@user_errors
@results.shows_failure(results.COMPARE_OUTPUTS)
def run_compare(file, page_number, spec_diffusion, spec_ar, third, knobs: dict, occlude_words="", occlude_fraction=0.0,
                degrade_dpi=150, blur=0.0, noise=0.0, jpeg=0, rotate=0.0, probe_seed=0, rounds=ROUNDS,
                progress=gr.Progress(), request: gr.Request = None):
    """AR, diffusion, then the chosen draft-and-verify decoder on one page, in interleaved rounds;
    yields a cleared screen, each decode as it grows beside the round's finished ones, then the last
    round with the verdict over every round (or, after Stop, the stopped screen). ``request``: the
    browser session its Stop button names."""
    names = results.COMPARE_OUTPUTS
    n_rounds = round_count(rounds)
    plan = compare_plan(spec_diffusion or "nano", spec_ar or "nano", third)
    order = ", then ".join(decoder_label(d) for d, _, _ in plan)
    times = f" ({n_rounds} rounds, interleaved)" if n_rounds > 1 else ""
    yield results.ordered(results.cleared(names, f"Decoding with {order}{times}…", f"Decoding: {order}."), names)
    probes = probe_spec(occlude_words, occlude_fraction, degrade_dpi, blur, noise, jpeg, rotate, probe_seed)
    for decoder, spec, _ in plan:
        models.check(spec, decoder)
    progress(0, desc="loading the page")
    page = prepare_page(file, page_number, probes)
    image = image_data_url(page.image)
    stream = uuid.uuid4().hex[:12]
    progress(0, desc="loading the models and encoding the page (prefill)")
    schedule = interleaved(plan, n_rounds)
    if jobs.ON_ZERO_GPU:  # one pickled GPU call for every decode: no frames on the way
        flat = jobs.compare_job(page, [step for rnd in schedule for step in rnd], knobs)
        done = [in_plan_order(flat[i * len(plan):(i + 1) * len(plan)], plan) for i in range(n_rounds)]
        yield results.ordered(results.compare_result(done[-1], image, probes, stream=stream, rounds=done), names)
        return
    done_rounds: list[list[Trace]] = []
    start = time.monotonic()
    for r, rnd in enumerate(schedule):
        done_traces: list[Trace] = []
        where = f"round {r + 1} of {n_rounds}: " if n_rounds > 1 else ""
        for decoder, spec, own in rnd:
            who = decoder_label(decoder)
            cb = _progress(progress, f"{where}{who}", "blocks" if decoder == "diffusion" else "tokens")
            job = (lambda snap, decoder=decoder, spec=spec, own=own, cb=cb:
                   jobs.decode_job(page, spec, decoder, {**knobs, **own}, cb, snap))
            before = "; ".join(f"{decoder_label(t.decoder)} done ({t.n_tokens} tokens)" for t in done_traces)
            latest, ended = None, False
            for finished, trace in jobs.streamed(job, tick_s=jobs.TICK_S, session=getattr(request, "session_hash", None)):
                if finished:
                    done_traces.append(trace)
                    ended = True
                    continue
                shown = trace or latest
                now = (f"{who}: {results.committed_so_far(shown)} tokens so far" if shown
                       else f"{who}: 0 tokens so far (encoding the page)")
                now += f"… · {time.monotonic() - start:.0f} s"
                frame = {"status": where + (before + "; " if before else "") + now}
                if trace is not None:  # a frame, not a tick (a tick only moves the status)
                    latest = trace
                    panes = in_plan_order([*done_traces, trace], plan)
                    live = next(k for k, t in enumerate(panes) if t is trace)
                    frame["player"] = results.compare_panes(panes, image, partial=live, stream=stream)
                yield results.ordered(frame, names)
            if not ended:  # Stop ended it (jobs.stop_session): no verdict on a half-run comparison
                yield results.ordered(results.stopped(names, RUN_LABEL), names)
                return
        done_rounds.append(in_plan_order(done_traces, plan))
    yield results.ordered(results.compare_result(done_rounds[-1], image, probes, stream=stream, rounds=done_rounds), names)


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
    return results.ordered(results.compare_result([ar, diff], _trace_image(diff)), results.COMPARE_OUTPUTS)


def build(default: str | None, model_choices: list[tuple[str, str]]) -> dict:
    knobs = controls.Knobs("compare")
    with gr.Row(equal_height=False):
        picker = controls.page_picker("compare", default)
        with gr.Column(scale=5, min_width=320):
            with gr.Row():
                model_d = gr.Dropdown(model_choices, value=model_choices[0][1], label="Diffusion model")
                model_a = gr.Dropdown(model_choices, value=model_choices[0][1], label="AR model")
            third = gr.Radio(THIRD_CHOICES, value="self-speculative", label="Third decoder (draft and verify)",
                             elem_id="compare-third")
            controls.diffusion_knobs(knobs, suffix=" (diffusion)")
            controls.diffusion_knobs(knobs, names=["draft_length"], suffix=" (draft and verify)")
            controls.max_tokens_control(knobs)
            rounds = gr.Slider(1, MAX_ROUNDS, value=ROUNDS, step=1, elem_id="compare-rounds",
                               label="Rounds (every decoder once per round, interleaved): more rounds, a truer spread")
            perturb = controls.perturb_panel("compare")
            with gr.Row():
                run = gr.Button(RUN_LABEL, variant="primary", elem_id="compare-run", scale=3)
                # in Run's place while the decodes run: a second Run click would be dropped without a word
                stop = gr.Button("Stop the comparison", variant="stop", elem_id="compare-stop", scale=3, visible=False)
                example = gr.Button("Load the bundled example pair (no model)", elem_id="compare-example", scale=2)
    status = gr.Markdown(elem_id="compare-status")
    verdict = gr.Markdown(elem_id="compare-verdict")
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
        with gr.Column(min_width=280):
            gr.Markdown("**Draft and verify against the ground truth**")
            diff_t = gr.HTML(elem_id="compare-diff-third")
    with gr.Accordion("Whole-run figures", open=True):
        with gr.Row():
            fig_fwd = gr.Plot(show_label=False, visible=False, elem_id="compare-fig-forward")
            fig_wall = gr.Plot(show_label=False, visible=False, elem_id="compare-fig-wall")
        with gr.Row():
            fig_conf = gr.Plot(show_label=False, visible=False)
            fig_order = gr.Plot(show_label=False, visible=False)
    files = gr.File(label="Downloads: both traces and an offline replay (HTML)", file_count="multiple", interactive=False,
                    elem_id="compare-downloads", visible=False)
    animation_row("compare", files)

    controls.wire_picker(picker, perturb)
    outputs = results.says_why([status, warning, player, table, diff_note, diff_ar, diff_d, diff_t, fig_fwd, fig_wall,
                                fig_conf, fig_order, files, verdict])
    inputs = [picker.file, picker.number, model_d, model_a, third, *knobs.values(), *perturb.inputs, rounds]
    third.change(lambda t: gr.update(visible=t != "none"), third, knobs["draft_length"], queue=False,
                 api_visibility="private")
    check = precheck.check_step(results.COMPARE_OUTPUTS, controls.with_knobs(check_compare, 5, knobs.names()))
    precheck.checked_then(run, check, controls.with_knobs(run_compare, 5, knobs.names()), inputs, outputs, "compare",
                          stop=stop, stopped=lambda: results.ordered(results.stopped(results.COMPARE_OUTPUTS, RUN_LABEL),
                                                                     results.COMPARE_OUTPUTS),
                          concurrency_id=MODEL_WORK, concurrency_limit=DECODE_SLOTS, scroll_to_output=True,
                          show_progress="minimal")
    example.click(compare_examples, None, outputs, api_name="compare_examples", scroll_to_output=True,
                  concurrency_id=LIGHT_WORK, concurrency_limit=LIGHT_SLOTS)
    return {"picker": picker, "run": run}
