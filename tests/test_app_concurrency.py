"""Concurrency and state rules of the app (issue 8), checked on the built app and the real code:
one model slot per process, models loaded once, plain data in gr.State, bounded output folders,
upload cap and run history from launch_kwargs, outside text inert in Markdown."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time

import pytest

from mudiff_viz.core.limits import current
from mudiff_viz.ui.capacity import DECODE_SLOTS
from tests.ui_support import SAMPLE

MODEL_CALLBACKS = {"run_decode", "run_compare", "run_shuffle", "run_shuffle_bench", "run_lesson"}


@pytest.fixture(scope="module")
def demo():
    from mudiff_viz.ui.app import build_app

    return build_app()


def test_every_model_event_shares_one_slot(demo):
    fns = [f for f in demo.fns.values() if getattr(f.fn, "__name__", "") in MODEL_CALLBACKS]
    assert {f.fn.__name__ for f in fns} == MODEL_CALLBACKS
    for f in fns:
        if f.name.startswith("load_example"):
            continue  # cached examples: their own event, kept to one slot by the process lock
        assert (f.concurrency_id, f.concurrency_limit) == ("model", DECODE_SLOTS), f.name


def test_opening_a_lesson_never_waits_behind_a_decode(demo):
    """A lesson's recording needs no model: its events are on the model-free queue, not the model slot."""
    from mudiff_viz.ui import howitworks
    from mudiff_viz.ui.capacity import LIGHT_WORK

    quick = [f for f in demo.fns.values()
             if f.concurrency_id == LIGHT_WORK
             and getattr(getattr(f.fn, "func", f.fn), "__name__", "") in ("show_lesson", "show_on_first_view")]
    assert len(quick) == len(howitworks.LESSONS) + 1  # a button per lesson and the tab's first view
    assert all(f.concurrency_limit > 1 for f in quick)


def test_model_jobs_hold_the_process_lock():
    from mudiff_viz.ui import jobs, shuffle_tab
    from mudiff_viz.ui.slot import MODEL_LOCK

    for job in (jobs.decode_job, shuffle_tab.shuffle_job, shuffle_tab.seeds_job, shuffle_tab.bench_job):
        assert job.__code__.co_filename.endswith("slot.py"), job  # the model_slot wrapper
    # behaviour: a decode waits while other holders have every slot
    done = threading.Event()
    with all_slots(MODEL_LOCK):
        t = threading.Thread(target=_call_held, args=(done,))
        t.start()
        time.sleep(0.3)
        assert not done.is_set()
    t.join(5)
    assert done.is_set()


@contextlib.contextmanager
def all_slots(lock):
    for _ in range(DECODE_SLOTS):
        lock.acquire()
    try:
        yield
    finally:
        for _ in range(DECODE_SLOTS):
            lock.release()


def _call_held(done: threading.Event) -> None:
    from mudiff_viz.ui.slot import model_slot

    model_slot(lambda: None)()
    done.set()


def test_decode_job_waits_for_the_slot(tiny_models):
    """A real decode through decode_job blocks while the slot is taken, then runs."""
    import torch

    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.ui import jobs
    from mudiff_viz.ui.slot import MODEL_LOCK

    torch.set_num_threads(1)
    page = load_page(SAMPLE)
    out = {}
    knobs = {"max_new_tokens": 8, "block_length": 8, "steps": 8}
    t = threading.Thread(target=lambda: out.setdefault("trace", jobs.decode_job(page, str(tiny_models["ar"]), "ar", knobs)))
    with all_slots(MODEL_LOCK):
        t.start()
        time.sleep(0.5)
        assert "trace" not in out and t.is_alive()
    t.join(120)
    assert out["trace"].decoder == "ar"


def test_model_loads_once_per_process(tiny_models):
    from models import registry

    spec = str(tiny_models["diffusion"])
    for key in [k for k in registry._cache if k[0] == spec]:
        del registry._cache[key]
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(registry.load_backend(spec, "diffusion"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(got) == 4 and all(b is got[0] for b in got)
    assert [k for k in registry._cache if k[0] == spec] == [(spec, "diffusion", registry.default_device())]


def test_state_holds_only_plain_data(demo):
    import copy

    import gradio as gr

    for block in demo.blocks.values():
        if isinstance(block, gr.State):
            json.dumps(block.value)
            copy.deepcopy(block.value)


def test_launch_kwargs_cap_uploads_and_keep_no_history(monkeypatch):
    from mudiff_viz.ui.app import launch_kwargs

    kw = launch_kwargs()
    assert kw["max_file_size"] == current().max_upload_bytes and kw["run_history"] is False
    monkeypatch.setenv("MUDIFF_MAX_UPLOAD_BYTES", "1234")
    assert launch_kwargs()["max_file_size"] == 1234


def test_old_output_folders_are_pruned(tmp_path):
    from mudiff_viz.ui.disk import prune

    old, new = tmp_path / "req-old", tmp_path / "req-new"
    for d in (old, new):
        d.mkdir()
        (d / "t.json").write_text("{}")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert prune(tmp_path) == 2  # bytes left: the new folder's file
    assert not old.exists() and new.exists()


def test_outside_text_is_inert_in_markdown():
    from markdown_it import MarkdownIt

    from mudiff_viz.ui.common import error_text
    from mudiff_viz.views.markdown import md_text

    raw = "![x](http://example.invalid/a.png) <img src=x onerror=alert(1)> **b** [l](javascript:x) # h\nnext"
    html = MarkdownIt("commonmark").render(md_text(raw))
    assert html.startswith("<p>") and html.count("<") == 2  # one paragraph of text, nothing else
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "**b**" in html and "javascript:x" in html
    assert error_text("field 'x' is '<b>'; & more") == "field 'x' is '&lt;b&gt;'; &amp; more"


def test_decode_slots_follow_the_machine_and_the_override():
    from mudiff_viz.ui import capacity

    gib = 2**30
    assert capacity.derived_slots(2, 20 * gib) == 1  # this build machine: two cores, one decode
    assert capacity.derived_slots(16, 128 * gib) == capacity.MAX_DECODE_SLOTS
    assert capacity.derived_slots(8, 4 * gib) == 2  # memory-bound: (4 - 1) GiB // 1.5 GiB
    assert capacity.derived_slots(1, 512 * 2**20) == 1  # never below one
    assert capacity.decode_slots({"MUDIFF_DECODE_SLOTS": "3"}) == 3
    for bad, why in (("0", "at least one"), ("two", "not a whole number")):
        with pytest.raises(ValueError, match=why):
            capacity.decode_slots({"MUDIFF_DECODE_SLOTS": bad})


def test_model_free_events_run_off_the_model_queue(demo):
    """Checks, replays and bundled examples never share the decode queue; every decode has its check first."""
    from mudiff_viz.ui.capacity import LIGHT_WORK

    by_api = {f.api_name: f for f in demo.fns.values() if f.api_name}
    for name in ("decode_check", "compare_check", "shuffle_check", "view_trace", "view_example", "compare_examples"):
        assert by_api[name].concurrency_id == LIGHT_WORK, name
    for name in ("decode", "compare", "shuffle"):
        # the run follows its check, only on its success (the Decode tab puts its Stop button in place between them)
        fn, check = by_api[name], by_api[f"{name}_check"]._id
        while fn.trigger_after is not None and fn.trigger_after != check:
            fn = demo.fns[fn.trigger_after]
        assert fn.trigger_after == check and fn.trigger_only_on_success, name


def test_memory_is_trimmed_only_when_every_slot_is_free():
    from mudiff_viz.ui import slot

    held = threading.Event()
    release = threading.Event()

    @slot.model_slot
    def hold():
        held.set()
        release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(10)
    assert slot.slots_in_use() == 1 and slot.trim_memory() is False  # a decode runs: nothing is trimmed
    release.set()
    t.join(10)
    assert slot.slots_in_use() == 0 and slot.trim_memory() is True  # glibc handed free pages back
