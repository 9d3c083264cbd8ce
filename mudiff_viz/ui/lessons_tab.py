"""The "How it works" tab: the lessons (mudiff_viz/ui/howitworks.py) and their own player.

A lesson's button runs its decodes on the bundled sample and plays them here, side by side on one
clock when there are two. Nothing of the Decode tab changes: a student's next Run is on the settings
they chose, not on the last lesson's.
"""

from __future__ import annotations

import uuid

import gradio as gr

from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.settings import KNOB
from mudiff_viz.ui import howitworks, jobs, models, pagework, results
from mudiff_viz.ui.common import default_sample, user_errors
from mudiff_viz.ui.player import Player
from mudiff_viz.ui.capacity import DECODE_SLOTS
from mudiff_viz.ui.slot import MODEL_WORK
from mudiff_viz.views.labels import counted
from mudiff_viz.views.markdown import md_text
from mudiff_viz.views.page_image import image_data_url
from mudiff_viz.views.player import compare_payload, player_payload

LESSON_OUTPUTS = ("status", "player")
BAD_CER = 0.05  # above this a pane "reads badly": the lesson says why in one line


def label(run: howitworks.Run, spec: str) -> str:
    """The pane's title; says so when another pair stood in for one that is not installed."""
    text = howitworks.run_label(run)
    return text if spec == run.family else f"{text} (run on {spec}: not installed)"


def pane(trace: Trace, run: howitworks.Run, spec: str, image: str | None, partial: bool, stream: str) -> dict:
    payload = player_payload(trace, image_url=image, label=label(run, spec), partial=partial, stream=stream)
    payload["short"] = howitworks.run_label(run).split(" · ")[-1]
    return payload


def panes_payload(panes: list[dict]) -> dict:
    if len(panes) == 1:
        return panes[0]
    out = compare_payload(panes)
    out["partial"] = any(p["partial"] for p in panes)
    out["stream"] = panes[0]["stream"]
    return out


def pane_line(trace: Trace, run: howitworks.Run) -> str:
    m = trace.metrics
    cer = f"CER {100 * m['cer']:.1f}%" if "cer" in m else "no ground truth"
    return (f"**{md_text(howitworks.run_label(run))}**: {counted(trace.clock_length, 'forward pass', 'forward passes')}, "
            f"{m.get('tokens_per_forward')} tokens per forward, {cer}")


def lesson_summary(lesson: howitworks.Lesson, traces: list[Trace], specs: list[str]) -> str:
    """What ran, each pane's headline numbers, what to watch, and (one line) why a pane reads badly."""
    lines = [f"**{md_text(lesson.title)}** on the bundled sample"]
    lines += [pane_line(t, r) for t, r in zip(traces, lesson.runs)]
    bad = [(t, r) for t, r in zip(traces, lesson.runs) if (t.metrics.cer or 0.0) > BAD_CER]
    for t, r in bad:
        why = lesson.cost or "the errors come from the model and these settings, not from the page (a clean bundled sample)"
        lines.append(f"⚠ {md_text(howitworks.run_label(r))} reads badly (CER {100 * t.metrics['cer']:.1f}%): {why}.")
    swapped = [f"{howitworks.PAIR_NAMES.get(r.family, r.family)} is not installed: the {s} pair ran instead"
               for r, s in zip(lesson.runs, specs) if s != r.family]
    lines += [f"Note: {x}." for x in dict.fromkeys(swapped)]
    lines.append(f"*Watch:* {lesson.watch}")
    return "  \n".join(lines)


@user_errors
@results.shows_failure(LESSON_OUTPUTS)
def run_lesson(key: str):
    """Run one lesson's decodes on the bundled sample; yields a cleared screen, frames, then the result."""
    lesson = next(x for x in howitworks.LESSONS if x.key == key)
    names = LESSON_OUTPUTS
    yield results.ordered(results.cleared(names, f"Running {lesson.title}…",
                                          "Decoding: the first frame appears after the first denoising step."), names)
    available = [spec for _, spec in models.choices()]
    specs = [howitworks.lesson_spec(r.family, available) for r in lesson.runs]
    for run, spec in zip(lesson.runs, specs):
        models.check(spec, run.decoder)
    page = pagework.load(default_sample(), 1)
    image = image_data_url(page.image)
    stream = uuid.uuid4().hex[:12]
    done_panes: list[dict] = []
    traces: list[Trace] = []
    for run, spec in zip(lesson.runs, specs):
        s = howitworks.run_settings(run)
        knobs = {k: v for k, v in s.items() if k in KNOB}
        trace = None
        for done, trace in jobs.streamed(lambda snap, spec=spec, run=run, knobs=knobs:
                                         jobs.decode_job(page, spec, run.decoder, knobs, None, snap)):
            if not done:
                frame = panes_payload(done_panes + [pane(trace, run, spec, image, True, stream)])
                yield results.ordered({"player": frame, "status": f"Running {md_text(lesson.title)}: "
                                       f"{md_text(howitworks.run_label(run))}, {counted(trace.clock_length, 'forward pass', 'forward passes')} so far…"},
                                      names)
        traces.append(trace)
        done_panes.append(pane(trace, run, spec, image, False, stream))
    yield results.ordered({"player": panes_payload(done_panes), "status": lesson_summary(lesson, traces, specs)}, names)


def lesson_runner(key: str):
    """The button's callback: a generator function of no arguments (Gradio streams it)."""

    def run():
        yield from run_lesson(key)

    return run


def build() -> None:
    gr.Markdown("### How diffusion decoding works: seven ideas, each one button away from a live run\n"
                "Each button decodes the bundled sample and plays it in the player below the lessons (the Decode "
                "tab's settings stay as you left them).")
    lessons = howitworks.LESSONS
    buttons = []
    for i in range(0, len(lessons), 2):
        with gr.Row(equal_height=True):
            for lesson in lessons[i : i + 2]:
                with gr.Column(variant="panel"):
                    gr.Markdown(f"#### {lesson.title}\n{lesson.body}")
                    buttons.append((lesson, gr.Button(lesson.button, size="sm", elem_id=f"lesson-{lesson.key}")))
    status = gr.Markdown(elem_id="lesson-status")
    player = Player(elem_id="lesson-player")
    for lesson, btn in buttons:
        btn.click(lesson_runner(lesson.key), None, results.says_why([status, player]), concurrency_id=MODEL_WORK, concurrency_limit=DECODE_SLOTS,
                  api_visibility="private", scroll_to_output=True, show_progress="minimal")
    gr.Markdown(howitworks.READING_GUIDE)
