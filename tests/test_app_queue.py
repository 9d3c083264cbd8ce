"""The app's queues on a real Gradio server (issue 38): model-free work never waits behind a decode,
a visitor who goes away has the decode cancelled within one unit of work and its slot freed, and a
waiting visitor hears its place in the queue.

The server runs in this process (tests/ui_support.launched_app) on random-weight twins with a long
answer cap, so a decode at block length 2 takes hundreds of blocks: long enough to be interrupted.
The visitor who leaves is a real gradio_client in a child process, killed with SIGKILL mid-decode
(its TCP connections close as a closed browser tab's do).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.ui_support import ROOT, SAMPLE, launched_app, make_tiny_twins, payload

LONG = {"block_length": 2, "steps": 2, "max_new_tokens": 1024}  # ~500 blocks on the long twins

LEAVER = r"""
import json
import sys
from gradio_client import Client, handle_file
client = Client(sys.argv[1], verbose=False)
job = client.submit(file=handle_file(sys.argv[2]), page_number=1, spec="nano", decoder="diffusion", block_length=2,
                    steps=2, threshold=0.9, temperature=0.0, strategy="low_confidence_dynamic", seed=0,
                    max_new_tokens=1024, api_name="/decode")
for out in job:  # the first streamed frame (a partial trace): the decode is under way
    player = out[2].get("value", out[2]) if isinstance(out[2], dict) else out[2]
    if isinstance(player, str) and player.startswith("{"):
        player = json.loads(player)  # the player's payload comes as JSON text
    if isinstance(player, dict) and player.get("partial"):
        print("frame", flush=True)
        break
import time
time.sleep(600)
"""


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    with launched_app(make_tiny_twins(tmp_path_factory.mktemp("long-models"), max_answer=1024)) as url:
        yield url


def wait_until(cond, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def decode_kwargs(**over):
    from gradio_client import handle_file

    kw = dict(file=handle_file(str(SAMPLE)), page_number=1, spec="nano", decoder="diffusion", block_length=8, steps=8,
              threshold=0.9, temperature=0.0, strategy="low_confidence_dynamic", seed=0, max_new_tokens=8)
    kw.update(over)
    return kw


def test_model_free_work_returns_while_a_decode_runs_and_a_leaver_is_cancelled(app):
    from gradio_client import Client

    from mudiff_viz.ui import jobs, slot

    before = len(jobs.CANCELLATIONS)
    leaver = subprocess.Popen([sys.executable, "-c", LEAVER, app, str(SAMPLE)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert leaver.stdout.readline().strip() == "frame", leaver.stderr.read()
        assert slot.slots_in_use() == slot.DECODE_SLOTS  # the leaver's decode holds the (only) model slot
        client = Client(app, verbose=False)
        # model-free work while the decode runs: a page-number check, a preview of a trace, a replay
        with pytest.raises(Exception, match="page 7 does not exist: the PDF has 1 page"):
            client.predict(**decode_kwargs(page_number=7), api_name="/decode_check")
        out = client.predict(api_name="/view_example")
        assert payload(out[2])["kind"] == "mudiff-player"
        assert slot.slots_in_use() == slot.DECODE_SLOTS and len(jobs.CANCELLATIONS) == before, \
            "the decode ended before the model-free calls returned: they did not overtake it"
    finally:
        os.kill(leaver.pid, signal.SIGKILL)
        leaver.wait()
    # the visitor left: its decode stops within one unit of work and gives its slot back
    record = wait_until(lambda: list(jobs.CANCELLATIONS)[before:], 60, "the leaver's decode to be cancelled")[0]
    assert record["units_at_stop"] - record["units_at_cancel"] <= 1, record
    # A record exists only where a snapshot raised Cancelled, i.e. before the decode's end (a decode that ran to its
    # end records nothing); how far it got before the kill depends on the machine's load, so no bound on it here.
    wait_until(lambda: slot.slots_in_use() == 0, 10, "the model slot to be free")
    # the freed worker serves the next visitor
    out = client.predict(**decode_kwargs(), api_name="/decode")
    assert payload(out[2])["kind"] == "mudiff-player" and not payload(out[2]).get("partial")


def test_a_waiting_visitor_hears_its_place_and_the_expected_wait(app):
    from gradio_client import Client

    client = Client(app, verbose=False)
    client.predict(**decode_kwargs(), api_name="/decode")  # one finished decode: Gradio knows how long one takes
    first = client.submit(**decode_kwargs(**LONG), api_name="/decode")
    wait_until(lambda: first.status().code.name in ("ITERATING", "PROCESSING"), 60, "the first decode to start")
    second = Client(app, verbose=False).submit(**decode_kwargs(), api_name="/decode")
    status = wait_until(lambda: (s := second.status()).code.name == "IN_QUEUE" and s.rank is not None and s, 30,
                        "the second visitor's queue status")
    assert status.rank == 0 and status.queue_size >= 1, status
    assert status.eta is not None and status.eta > 0, status
    first.cancel()
    second.result(timeout=120)
