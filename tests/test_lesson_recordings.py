"""The lessons' shipped recordings (assets/lessons/): each equals a live decode of its run by the
shipped models (greedy, so the same tokens), and every lesson opens on them with no model at all.

When a model is retrained or a lesson's run changes, the first test fails until
``python scripts/record_lessons.py`` is rerun.
"""

from __future__ import annotations

import pytest

from models import registry
from mudiff_viz.ui import howitworks, lesson_recordings, lessons_tab
from mudiff_viz.views.lesson_figures import run_figures

RUNS = lesson_recordings.distinct_runs()


@pytest.fixture
def no_models(tmp_path):
    """The registry pointed at an empty folder: no embedded model is installed, none is loaded."""
    old = registry.NANO_DIR
    registry.NANO_DIR = tmp_path
    registry._cache.clear()
    try:
        yield
    finally:
        registry.NANO_DIR = old
        registry._cache.clear()


def test_every_lesson_opens_on_its_recording_with_no_model_installed(no_models):
    for lesson in howitworks.LESSONS:
        view = lessons_tab.recorded_view(lesson.key)
        payload = view["player"]
        assert payload["kind"] == "mudiff-player", (lesson.key, payload)
        panes = payload.get("panes", [payload])
        assert len(panes) == len(lesson.runs)
        assert "Recorded run" in view["status"] and "no model ran" in view["status"]
        # the tab says which model and decoder each pane uses
        for run in lesson.runs:
            assert howitworks.run_uses(run, run_figures(lesson_recordings.load_recording(run))) in view["text"]
            assert howitworks.DECODER_NAMES[run.decoder] in view["text"]
    assert not registry._cache


def test_a_missing_recording_says_to_rerun_live(tmp_path, monkeypatch):
    monkeypatch.setattr(lesson_recordings, "LESSONS_DIR", tmp_path)
    view = lessons_tab.recorded_view(howitworks.LESSONS[0].key)
    assert view["player"]["kind"] == "message" and "Rerun live" in view["status"]


def test_no_recording_is_left_over_and_all_are_small():
    names = {lesson_recordings.recording_path(r).name for r in RUNS}
    shipped = {p.name for p in lesson_recordings.LESSONS_DIR.glob("*.json.gz")}
    assert shipped == names, shipped ^ names
    assert sum(p.stat().st_size for p in lesson_recordings.LESSONS_DIR.glob("*.json.gz")) < 600_000


@pytest.mark.parametrize("run", RUNS, ids=lesson_recordings.run_key)
def test_the_recording_equals_a_live_run(run):
    recorded = lesson_recordings.load_recording(run)
    assert recorded is not None, f"no recording of {lesson_recordings.run_key(run)}: run scripts/record_lessons.py"
    live = lesson_recordings.decode_run(run, record=False)
    assert (recorded.decoder, recorded.model.spec) == (live.decoder, live.model.spec)
    knobs = set(lesson_recordings.run_knobs(run))
    assert {k: v for k, v in recorded.params.items() if k in knobs} == {k: v for k, v in live.params.items() if k in knobs}
    assert [[t.id for t in r.tokens] for r in recorded.regions] == [[t.id for t in r.tokens] for r in live.regions], \
        f"{lesson_recordings.run_key(run)} differs from a live decode: rerun scripts/record_lessons.py"
    assert recorded.text == live.text


def test_panes_whose_text_matters_read_and_say_with_which_decoder():
    """A pane whose text is the lesson's point reads (<= 3% CER on the sample); on the subword pair it
    runs a draft-and-verify decoder, and the lesson's text names it."""
    from mudiff_viz.decoding.settings import SPECULATIVE

    reading = [(lesson, run) for lesson in howitworks.LESSONS for run in lesson.runs if run.reads]
    assert any(run.family == howitworks.SUBWORD for _, run in reading)
    for lesson, run in reading:
        if run.family == howitworks.SUBWORD:
            assert run.decoder in SPECULATIVE, run
        assert lesson_recordings.load_recording(run).metrics.cer <= 0.03, run
        text = lessons_tab.lesson_text(lesson, lessons_tab.recorded_traces(lesson))
        assert howitworks.DECODER_NAMES[run.decoder] in text
        if run.decoder == "self-speculative":
            assert "decoder that reads" in text


def lesson(key: str) -> howitworks.Lesson:
    return next(x for x in howitworks.LESSONS if x.key == key)


def test_lesson_2_caption_counts_what_the_header_counts():
    """Issue 36: the block-8 pane's header said "committed this step 32" while the caption said 56.
    Issue 48: both count the same positions (core/counts.py: tokens plus fillers after the end of
    text, which the header splits). Every guess above the threshold is committed
    (low_confidence_dynamic), so the caption's count never exceeds the header's."""
    from mudiff_viz.views.player import series

    for run in lesson("blocks").runs:
        trace = lesson_recordings.load_recording(run)
        ser = series(trace)
        assert all(a <= c for a, c in zip(ser["above"], ser["committed"])), (run.label, ser["above"], ser["committed"])
        assert all(c == k + f for c, k, f in zip(ser["committed"], ser["kept"], ser["fillers"]))
        assert any(ser["above"])


def test_lesson_5_orders_differ_in_numbers_and_order():
    """Issue 36: random and left_to_right reported identical numbers (48 forwards, 1.284 tokens per
    forward, CER 0.0%). Same passes by design (the quota), but the reading and the order differ."""
    from mudiff_viz.core.metrics import mean_steps_per_block, order_correlation

    runs = lesson("strategy").runs
    random_t, ltr_t = (lesson_recordings.load_recording(r) for r in runs)
    # the same passes per block (the quota: one position a pass); only the order differs (a pane whose
    # end of text is committed early runs fewer blocks)
    assert mean_steps_per_block(random_t) == mean_steps_per_block(ltr_t) == 32
    assert random_t.clock_length % 32 == 0 and ltr_t.clock_length % 32 == 0
    assert random_t.metrics.cer - ltr_t.metrics.cer > 0.2 and ltr_t.metrics.cer <= 0.03
    assert order_correlation(ltr_t) > 0.9 and order_correlation(random_t) < 0.4
    lines = [lessons_tab.pane_line(t, r).split(":", 1)[1] for t, r in zip((random_t, ltr_t), runs)]
    assert lines[0] != lines[1]
    # the decoding-order chart plots commit forward against position: different for the two panes
    commits = [[[t.commit_forward for t in reg.tokens] for reg in tr.regions] for tr in (random_t, ltr_t)]
    assert commits[0] != commits[1]


def test_lesson_8_says_what_each_forward_buys():
    """Diffusion drafts, AR verifies: the speculative pane reads exactly the AR twin's text in fewer
    forwards, the self-speculative one in fewer still; the line above the player counts the drafts."""
    from mudiff_viz.core.trace import REJECTED

    the = lesson("drafts")
    ar, spec, self_spec = (lesson_recordings.load_recording(r) for r in the.runs)
    assert (ar.decoder, spec.decoder, self_spec.decoder) == ("ar", "speculative", "self-speculative")
    assert {t.model.spec for t in (ar, spec, self_spec)} == {"nano-subword"}
    assert [[t.id for t in r.tokens] for r in spec.regions] == [[t.id for t in r.tokens] for r in ar.regions]
    assert ar.metrics.tokens_per_forward == 1.0
    assert spec.metrics.tokens_per_forward > 1.5 and self_spec.metrics.tokens_per_forward > 2.0
    assert self_spec.clock_length < spec.clock_length < ar.clock_length
    summary = lessons_tab.lesson_summary(the, [ar, spec, self_spec], [r.family for r in the.runs], recorded=True)
    for t in (spec, self_spec):
        rejected = sum(v == REJECTED for s in t.steps for v in (s.verdicts or ()))
        assert rejected > 0
        assert f"{t.metrics.drafted} drafts: **{t.metrics.accepted} accepted**, {rejected} rejected" in summary
        assert f"{t.metrics.tokens_per_forward:.2f} tokens per forward (AR: 1)" in summary
