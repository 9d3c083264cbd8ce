"""The "How it works" tab: the lessons (mudiff_viz/ui/howitworks.py) and their own player.

A lesson opens at once on its recorded run (assets/lessons/, ui/lesson_recordings.py: no model
runs); *Rerun live* decodes the same run on the bundled sample here, side by side on one clock when
there are two. Nothing of the Decode tab changes: a student's next Run is on the settings they
chose, not on the last lesson's.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass

import gradio as gr

from mudiff_viz.core.metrics import order_correlation
from mudiff_viz.core.speculation import step_drafts
from mudiff_viz.core.trace import REJECTED, Trace
from mudiff_viz.ui import howitworks, jobs, lesson_recordings, models, results
from mudiff_viz.ui.animation import animation_row
from mudiff_viz.ui.common import user_errors
from mudiff_viz.ui.links import with_link
from mudiff_viz.ui.player import Player
from mudiff_viz.ui.capacity import DECODE_SLOTS, LIGHT_SLOTS, LIGHT_WORK
from mudiff_viz.ui.slot import MODEL_WORK
from mudiff_viz.views.labels import NUMBER_WORDS, counted
from mudiff_viz.views.lesson_figures import MissingFigure, RunFigures, render, run_figures
from mudiff_viz.views.markdown import md_text
from mudiff_viz.views.page_image import image_data_url
from mudiff_viz.views.player import compare_payload, player_payload

LESSON_OUTPUTS = ("text", "status", "player")
SHOWN_OUTPUTS = ("current", "text", "status", "player")  # what opening a lesson sets
RECORDED_NOTE = ("**Recorded run** (shipped with the app, made from its models by `scripts/record_lessons.py`): no model ran "
                 "to show it; *Rerun live* decodes it here.")
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
    parts = [counted(trace.clock_length, "forward pass", "forward passes")]
    if trace.is_speculative and trace.steps:
        parts.append(draft_counts(trace))
    parts.append(f"{m.tokens_per_forward:.2f} tokens per forward" + (" (AR: 1)" if trace.is_speculative else ""))
    order = order_correlation(trace) if trace.decoder == "diffusion" else None
    if order is not None:
        parts.append(f"decoding order vs position r = {order:.2f}")
    parts.append(cer)
    return f"**{md_text(howitworks.run_label(run))}**: " + ", ".join(parts)


def draft_counts(trace: Trace) -> str:
    """What a draft-and-verify run's forwards proposed and what became of it (every draft is verified)."""
    proposed = sum(step_drafts(s).drafted for s in trace.steps if s.verdicts is not None)
    rejected = sum(v == REJECTED for s in trace.steps for v in (s.verdicts or ()))
    m = trace.metrics
    what = f"{proposed} drafts" if proposed == m.drafted else f"{proposed} drafts proposed, {m.drafted} verified"
    return (f"{what}: **{m.accepted} accepted**, {rejected} rejected (the verifier's token instead), "
            f"{m.drafted - m.accepted - rejected} discarded after a rejection")


def lesson_summary(lesson: howitworks.Lesson, traces: list[Trace], specs: list[str], recorded: bool = False) -> str:
    """What ran, each pane's headline numbers, what to watch, and (one line) why a pane reads badly."""
    lines = [RECORDED_NOTE] if recorded else ["**Live run** on this machine."]
    lines.append(f"**{md_text(lesson.title)}** on the bundled sample")
    lines += [pane_line(t, r) for t, r in zip(traces, lesson.runs)]
    bad = [(t, r) for t, r in zip(traces, lesson.runs) if (t.metrics.cer or 0.0) > BAD_CER]
    for t, r in bad:
        why = lesson.cost or "the errors come from the model and these settings, not from the page (a clean bundled sample)"
        lines.append(f"⚠ {md_text(howitworks.run_label(r))} reads badly (CER {100 * t.metrics['cer']:.1f}%): {why}.")
    swapped = [f"{howitworks.PAIR_NAMES.get(r.family, r.family)} is not installed: the {s} pair ran instead"
               for r, s in zip(lesson.runs, specs) if s != r.family]
    lines += [f"Note: {x}." for x in dict.fromkeys(swapped)]
    try:
        watch = lesson_words(lesson, traces)[1]
    except MissingFigure:  # a stand-in run lacks a figure: the line's words, its figures left out
        watch = render(lesson.watch, None)
    lines.append(f"*Watch:* {watch}")
    return "  \n".join(lines)


def find_lesson(key: str) -> howitworks.Lesson:
    return next((x for x in howitworks.LESSONS if x.key == key), howitworks.LESSONS[0])


def lesson_words(lesson: howitworks.Lesson, traces: list[Trace] | None) -> tuple[str, str]:
    """The lesson's body and its *Watch* line, every figure filled from the runs it plays (``traces``,
    one per pane); with no runs, each figure is an ellipsis."""
    panes: list[RunFigures] | None = [run_figures(t) for t in traces] if traces else None
    derived = lesson.derived(panes) if panes else {}
    return render(lesson.body, panes, **derived), render(lesson.watch, panes, **derived)


def lesson_text(lesson: howitworks.Lesson, traces: list[Trace] | None = None) -> str:
    """The lesson's text and, for each pane, which model and decoder it uses, as they ran in ``traces``
    (the recordings or a live rerun). A figure a run lacks says so in one line, never as None."""
    try:
        body = lesson_words(lesson, traces)[0]
        figs = [run_figures(t) for t in traces] if traces else [None] * len(lesson.runs)
        uses = "\n".join(f"- **{md_text(howitworks.run_label(r))}**: {howitworks.run_uses(r, f)}"
                         for r, f in zip(lesson.runs, figs))
    except MissingFigure as e:
        return f"#### {lesson.title}\nThis lesson's figures come from its runs, and one lacks {e}: press *Rerun live*."
    where = "on the bundled sample" if traces else "on the bundled sample; its figures fill in from the recorded run"
    return f"#### {lesson.title}\n{body}\n\n**What runs** ({where}):\n{uses}"


@functools.lru_cache(maxsize=1)
def lesson_image() -> str:
    return image_data_url(lesson_recordings.lesson_page().image)


def recorded_traces(lesson: howitworks.Lesson) -> list[Trace] | None:
    """The lesson's shipped recordings, one per pane; None when one is missing."""
    traces = [lesson_recordings.load_recording(r) for r in lesson.runs]
    return None if any(t is None for t in traces) else traces


def recorded_view(key: str) -> dict:
    """A lesson opened on its recorded runs: its text, the summary and the player, with no model run."""
    lesson = find_lesson(key)
    traces = recorded_traces(lesson)
    out = {"current": lesson.key, "text": lesson_text(lesson, traces)}
    if traces is None:
        out["status"] = (f"**{md_text(lesson.title)}**: no recorded run is shipped for this lesson "
                         "(`python scripts/record_lessons.py` writes them); press *Rerun live*.")
        out["player"] = results.message("No recording: press Rerun live to decode this lesson here.")
        return out
    image, stream = lesson_image(), uuid.uuid4().hex[:12]
    out["player"] = with_link(panes_payload([pane(t, r, r.family, image, False, stream) for t, r in zip(traces, lesson.runs)]),
                              {"lesson": lesson.key})
    out["status"] = lesson_summary(lesson, traces, [r.family for r in lesson.runs], recorded=True)
    return out


def button_variants(key: str) -> list:
    """The open lesson's button stands out: which lesson is on screen is never a guess."""
    return [gr.update(variant="primary" if x.key == key else "secondary") for x in howitworks.LESSONS]


@user_errors
def show_lesson(key: str):
    """A lesson button's callback: the lesson on its recording, at once."""
    return (*results.ordered(recorded_view(key), SHOWN_OUTPUTS), *button_variants(key))


@user_errors
def show_on_first_view(key: str, shown: bool):
    """The tab's first view opens the current lesson on its recording; later views leave it as it is."""
    if shown:
        return (gr.skip(),) * (len(SHOWN_OUTPUTS) + 1 + len(howitworks.LESSONS))
    return (True, *results.ordered(recorded_view(key), SHOWN_OUTPUTS), *button_variants(key))


@user_errors
@results.shows_failure(LESSON_OUTPUTS, keep=("text",))  # a failed rerun leaves the lesson's words
def run_lesson(key: str):
    """Run one lesson's decodes on the bundled sample; yields a cleared screen, frames, then the result."""
    lesson = find_lesson(key)
    names = LESSON_OUTPUTS
    yield results.ordered(results.cleared(("status", "player"), f"Running {lesson.title}…",
                                          "Decoding: the first frame appears after the first denoising step."), names)
    available = [spec for _, spec in models.choices()]
    specs = [howitworks.lesson_spec(r.family, available) for r in lesson.runs]
    for run, spec in zip(lesson.runs, specs):
        models.check(spec, run.decoder)
    page = lesson_recordings.lesson_page()
    image = lesson_image()
    stream = uuid.uuid4().hex[:12]
    done_panes: list[dict] = []
    traces: list[Trace] = []
    for run, spec in zip(lesson.runs, specs):
        trace = None
        for done, trace in jobs.streamed(lambda snap, spec=spec, run=run:
                                         lesson_recordings.decode_run(run, spec, page, snap)):
            if not done:
                frame = panes_payload(done_panes + [pane(trace, run, spec, image, True, stream)])
                yield results.ordered({"player": frame, "status": f"Running {md_text(lesson.title)}: "
                                       f"{md_text(howitworks.run_label(run))}, {counted(trace.clock_length, 'forward pass', 'forward passes')} so far…"},
                                      names)
        traces.append(trace)
        done_panes.append(pane(trace, run, spec, image, False, stream))
    yield results.ordered({"player": panes_payload(done_panes), "status": lesson_summary(lesson, traces, specs),
                           "text": lesson_text(lesson, traces)}, names)


def lesson_animation_traces(key: str) -> list:
    """The open lesson's recorded runs, over the bundled page, for its animation downloads."""
    lesson = find_lesson(key)
    image = lesson_recordings.lesson_page().image
    runs = [(r, lesson_recordings.load_recording(r)) for r in lesson.runs]
    return [(f"lesson-{lesson.key}.{lesson_recordings.run_key(r)}", t, image) for r, t in runs if t is not None]


@dataclass
class LessonsTab:
    shown: gr.State  # the tab's first view has opened a lesson (a link counts)
    outputs: list  # SHOWN_OUTPUTS, then the lesson buttons


def build(tab=None) -> LessonsTab:
    """The tab: a button per lesson (opens it on its recording), the lesson's text, *Rerun live*,
    the status line and the lessons' own player. ``tab``: the gr.Tab, whose first view opens lesson 1."""
    lessons = howitworks.LESSONS
    gr.Markdown(f"### How diffusion decoding works: {NUMBER_WORDS[len(lessons)]} ideas, each on a recorded run\n"
                "Pick a lesson: it opens at once on a run recorded with the app's own models; *Rerun live* decodes it "
                "again here (the Decode tab's settings stay as you left them).")
    current = gr.State(lessons[0].key)
    shown = gr.State(False)
    buttons = []
    with gr.Row(elem_id="lesson-buttons"):
        for lesson in lessons:
            buttons.append((lesson, gr.Button(lesson.title, size="sm", elem_id=f"lesson-{lesson.key}", min_width=120,
                                              variant="primary" if lesson is lessons[0] else "secondary")))
    text = gr.Markdown(lesson_text(lessons[0], recorded_traces(lessons[0])), elem_id="lesson-text")
    with gr.Row():
        live = gr.Button("↻ Rerun live (decodes on this machine)", size="sm", variant="secondary", elem_id="lesson-live",
                         scale=0, min_width=260)
    status = gr.Markdown(elem_id="lesson-status")
    player = Player(elem_id="lesson-player")
    animation_row("lesson", current, lesson_animation_traces)
    shown_outputs = [current, text, status, player, *(b for _, b in buttons)]
    # opening a recording runs no model: its own queue, never behind a decode
    quick = {"concurrency_id": LIGHT_WORK, "concurrency_limit": LIGHT_SLOTS, "api_visibility": "private"}
    for lesson, btn in buttons:
        btn.click(functools.partial(show_lesson, lesson.key), None, shown_outputs, scroll_to_output=True,
                  show_progress="hidden", **quick)
    if tab is not None:
        tab.select(show_on_first_view, [current, shown], [shown, *shown_outputs], show_progress="hidden", **quick)
    live.click(run_lesson, [current], results.says_why([text, status, player]), concurrency_id=MODEL_WORK, concurrency_limit=DECODE_SLOTS,
               api_visibility="private", scroll_to_output=True, show_progress="minimal")
    gr.Markdown(howitworks.READING_GUIDE)
    return LessonsTab(shown, shown_outputs)
