"""Issue 48: every figure in a lesson's words comes from the recording it plays (assets/lessons/).

Lesson 2 once said "10 against 4" passes over a recording of 9 and 3, lesson 1 typed "about 23
passes per block", lessons 7 and 8 printed the draft-length knob's raw 0 ("the model's own"). The
lessons' text is now a template filled from the recordings (views/lesson_figures.py); these tests
read the rendered text, on the shipped recordings, as a student sees it.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from mudiff_viz.ui import howitworks, lesson_recordings, lessons_tab
from mudiff_viz.views import lesson_figures
from mudiff_viz.views.lesson_figures import MissingFigure, filled, run_figures

NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# digits that are no figure of a run: lesson numbers, and the concept "a block of length 1" (AR)
NOT_FIGURES = re.compile(r"^\d+ · |lessons? \d+(?: and \d+)?|[Bb]lock[ -]length[ -]1\b")
RAW_DEFAULT = re.compile(r"\b(?:None|nan|NaN)\b|\b(?:drafts|block|steps|threshold|floor|length|draft length) 0(?![.\d\\])"
                         r"|\b0 tokens\b")


def recordings(lesson: howitworks.Lesson):
    traces = lessons_tab.recorded_traces(lesson)
    assert traces is not None, f"lesson {lesson.key} lacks a recording: run scripts/record_lessons.py"
    return traces


def numbers(text: str) -> list[str]:
    return NUMBER.findall(NOT_FIGURES.sub(" ", text))


def lesson_id(lesson: howitworks.Lesson) -> str:
    return lesson.key


@pytest.mark.parametrize("lesson", howitworks.LESSONS, ids=lesson_id)
def test_every_number_in_a_lesson_is_filled_from_its_recording(lesson):
    """Body, *Watch* line and *What runs*: each number on screen was put there by a field filled from
    the pane's recording, so none is typed into the prose; a pane's label (the run's own settings)
    quotes only values its recording's params hold."""
    traces = recordings(lesson)
    panes = [run_figures(t) for t in traces]
    derived = lesson.derived(panes)
    pieces = [filled(lesson.body, panes, **derived), filled(lesson.watch, panes, **derived)]
    pieces += [filled(howitworks.uses_template(r), [f]) for r, f in zip(lesson.runs, panes)]
    text = lessons_tab.lesson_text(lesson, traces)
    summary = lessons_tab.lesson_summary(lesson, traces, [r.family for r in lesson.runs], recorded=True)
    assert pieces[0][0] in text and pieces[1][0] in summary  # what the tab shows is these pieces
    assert all(rendered in text for rendered, _ in pieces[2:])
    for rendered, fills in pieces:
        from_recording = Counter(n for f in fills for n in NUMBER.findall(f))
        said = Counter(numbers(rendered))
        assert not said - from_recording, (lesson.key, said - from_recording, rendered)
    for run, trace in zip(lesson.runs, traces):
        params = {str(v) for v in trace.params.values()}
        assert set(numbers(howitworks.run_label(run))) <= params, (run.label, trace.params)


@pytest.mark.parametrize("lesson", howitworks.LESSONS, ids=lesson_id)
def test_no_lesson_shows_none_nan_or_a_raw_zero_knob(lesson):
    traces = recordings(lesson)
    shown = [lessons_tab.lesson_text(lesson, traces),
             lessons_tab.lesson_summary(lesson, traces, [r.family for r in lesson.runs], recorded=True),
             lessons_tab.lesson_text(lesson, None)]  # no recording: the words with no figures, never None
    for text in shown:
        assert not RAW_DEFAULT.search(text), (lesson.key, RAW_DEFAULT.search(text)[0], text)
    assert "…" in shown[2] or not NUMBER.search(NOT_FIGURES.sub(" ", lesson.body + lesson.watch))


def clock_and_blocks(trace):
    """Independently of the app's code: forwards on the clock and forwards per (line, block)."""
    per_block = Counter((s.region, s.block) for s in trace.steps)
    last = max([s.forward for s in trace.steps] + [t.commit_forward for r in trace.regions for t in r.tokens])
    return last + 1, per_block


def lesson(key: str) -> howitworks.Lesson:
    return next(x for x in howitworks.LESSONS if x.key == key)


def test_lesson_2_counts_the_passes_its_recording_made():
    """The issue's case: "10 against 4" beside a recording of 9 and 3."""
    the = lesson("blocks")
    b32, b8 = recordings(the)
    (n32, _), (n8, per8) = clock_and_blocks(b32), clock_and_blocks(b8)
    text = lessons_tab.lesson_text(the, [b32, b8])
    assert f"({n8} against {n32})" in text
    ratio = n8 / n32
    assert (f"{ratio:.0f} times the passes" if ratio == round(ratio) else f"about {ratio:.1f} times") in text
    assert set(per8.values()) == {1} and "exactly 1 forward per block in both panes" in text
    first = sum(t.commit_forward == 0 for r in b8.regions for t in r.tokens)
    assert f"its first pass commits {first} over {len({s.region for s in b8.steps if s.forward == 0})} lines" in text


def test_lesson_1_says_the_passes_per_block_of_its_recording():
    the = lesson("masks")
    (trace,) = recordings(the)
    _, per_block = clock_and_blocks(trace)
    counts = list(per_block.values())
    text = lessons_tab.lesson_text(the, [trace])
    assert f"its blocks took {min(counts)} to {max(counts)} passes here, {sum(counts) / len(counts):.0f} on average" in text
    assert "23 passes" not in text


@pytest.mark.parametrize("key", ["pairs", "drafts"])
def test_draft_and_verify_panes_say_the_draft_length_that_ran(key):
    """The knob's 0 means "the model's own": the lesson says the length the trace records."""
    the = lesson(key)
    traces = recordings(the)
    text = lessons_tab.lesson_text(the, traces)
    for run, trace in zip(the.runs, traces):
        if trace.is_speculative:
            n = trace.params["draft_length"]
            assert n > 0 and f"drafts {n} tokens" in text
            if trace.verifier is not None:
                assert f"`{trace.verifier.name}` verifies" in text
    assert "drafts 0" not in text


def test_the_words_follow_the_trace_they_are_given():
    """The same lesson over another run says that run's figures: nothing is typed in."""
    the = lesson("masks")
    ltr = lesson_recordings.load_recording(lesson("strategy").runs[1])
    text = lessons_tab.lesson_text(the, [ltr])
    assert "its blocks took exactly 32 passes here, 32 on average" in text
    assert f"block {ltr.params['block_length']}, {ltr.params['steps']} steps" in text


def test_a_figure_a_run_lacks_is_said_in_one_line_never_as_none():
    """Lesson 4 asks for steps per block; an AR run has no blocks."""
    ar = lesson_recordings.load_recording(lesson("ar").runs[0])
    with pytest.raises(MissingFigure):
        lesson_figures.render(lesson("steps").body, [run_figures(ar)])
    text = lessons_tab.lesson_text(lesson("steps"), [ar])
    assert "lacks" in text and "None" not in text and "Rerun live" in text
    summary = lessons_tab.lesson_summary(lesson("steps"), [ar], ["nano"])
    assert "*Watch:* Every pass commits … positions per line" in summary and "None" not in summary
