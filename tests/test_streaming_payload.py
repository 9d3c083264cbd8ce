"""Streamed frames reach the browser as whole texts, not as Gradio's per-element diffs.

Gradio sends each frame of a generator as a diff against the previous one, computed in Python on
the server's event loop. Over the player's nested payload of a long page that diff visited every
list entry, took over a second per frame, and came out larger than the payload itself: the player
and the status stalled on long pages and the result came long after the decode ended (issue 36).
As JSON text, two frames differ by one edit.
"""

from __future__ import annotations

import json

import pytest
import torch
from gradio import utils

from mudiff_viz.bench.speed import bench_pages
from mudiff_viz.decoding.pipeline import decode_page
from mudiff_viz.decoding.settings import DecodeParams
from mudiff_viz.ui.player import Player
from mudiff_viz.views.player import player_payload


@pytest.fixture(scope="module")
def frames(tiny_models):
    """Frames of a whole-page decode (a benchmark page, 40+ lines) as the Decode tab streams them."""
    torch.set_num_threads(1)
    snaps = []
    trace = decode_page(bench_pages(1)[0], model=str(tiny_models["diffusion"]), decoder="diffusion",
                        params=DecodeParams(block_length=8, steps=8, max_new_tokens=24), snapshot=lambda make: snaps.append(make()))
    assert len(snaps) >= 3 and len(trace.regions) > 30
    return [player_payload(s, partial=True, stream="s") for s in snaps[-3:-1]] + [player_payload(trace, stream="s")]


def test_each_frame_is_one_edit_of_text(frames):
    player = Player()
    sent = [player.postprocess(f) for f in frames]
    assert all(isinstance(s, str) for s in sent)
    assert [json.loads(s) for s in sent] == json.loads(json.dumps(frames))  # the same payload, as text
    for old, new in zip(sent, sent[1:]):
        edits = utils.diff(old, new)
        assert len(edits) == 1 and edits[0][0] in ("replace", "append")
    # what the nested payload cost: an edit per changed list entry, more bytes than the payload
    nested = utils.diff(frames[-2], frames[-1])
    assert len(nested) > 100


def test_the_player_reads_text_and_objects():
    player = Player()
    assert player.postprocess(None) is None and player.postprocess('{"kind":"message"}') == '{"kind":"message"}'
    assert json.loads(player.postprocess({"kind": "message", "message": "é <script>"})) == {"kind": "message",
                                                                                           "message": "é <script>"}


def test_a_long_stretch_without_frames_still_moves_the_status():
    """Before: the status only changed with a frame, so a long page's prefill (no frame until the first
    block) left it still for seconds. Now ``streamed`` ticks, and the Decode tab's status counts seconds."""
    import threading

    from mudiff_viz.ui import jobs, results

    prefill_done = threading.Event()

    def job(snapshot):
        prefill_done.wait(30)  # "the prefill": no snapshot until the consumer has seen a tick
        return "the trace"

    out = []
    for done, got in jobs.streamed(job, tick_s=0.01):
        out.append((done, got))
        if not done and got is None:
            prefill_done.set()
    assert out[0] == (False, None) and out[-1] == (True, "the trace")
    assert results.live_status(None, 3.2) == "Decoding… encoding the page (prefill) · 3 s"


def test_stop_ends_a_sessions_stream_at_its_next_unit_without_a_result():
    """The Decode tab's Stop: ``stop_session`` sets the session's cancel flag, the job raises at its next
    snapshot, and the stream ends with no result (the handler then shows the stopped screen). Another
    session's stream runs on."""
    import threading

    from mudiff_viz.ui import jobs

    units = []
    go_on = threading.Event()

    def job(snapshot):
        for k in range(1000):
            snapshot(lambda: f"frame {k}")
            units.append(k)
            if k == 3:
                go_on.wait(30)
        return "the whole trace"

    out = []
    for done, got in jobs.streamed(job, interval_s=0.0, tick_s=0.01, session="visitor-a"):
        out.append((done, got))
        if len(units) == 4 and not go_on.is_set():
            assert jobs.stop_session("someone-else") == 0
            assert jobs.stop_session("visitor-a") == 1
            go_on.set()
    assert not any(done for done, _ in out) and len(units) == 4  # stopped at the next snapshot, no result
    assert "visitor-a" not in jobs.RUNNING


def test_the_live_status_counts_what_the_player_shows(tiny_models):
    """Before: "0 tokens so far" while the player showed text: a region's token list grows only when
    its block is done. The status counts the step records' commits, as the player draws them."""
    from mudiff_viz.ui import results

    snaps = []
    decode_page(bench_pages(1)[0], model=str(tiny_models["diffusion"]), decoder="diffusion",
                params=DecodeParams(block_length=8, steps=8, max_new_tokens=24), snapshot=lambda make: snaps.append(make()))
    first = snaps[0]
    shown = sum(sum(s.committed) for s in first.steps)
    assert first.n_tokens == 0 < shown  # mid-block: nothing finished, something committed
    assert results.committed_so_far(first) == shown
    assert results.live_status(first, 2.0).startswith(f"Decoding… {shown} tokens committed so far, 1 forward")
    payload = player_payload(first, partial=True, stream="s")
    assert sum(1 for c in payload["slots"]["commit"] if c >= 0) >= shown  # the player draws at least those
