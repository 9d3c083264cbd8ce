"""Hostile traces that are valid JSON of the right types but mean nothing (issue 38): non-finite
numbers, counts that contradict each other, positions outside their block, boxes off the page, sizes
past a stated limit. Each is refused with one line naming the first problem, the same line in
``mv.load_trace``, the CLI's ``view`` (non-zero exit) and the Trace viewer tab (its gr.Error)."""

from __future__ import annotations

import json
from pathlib import Path

import gradio as gr
import pytest

import mudiff_viz as mv
from mudiff_viz.cli.main import main
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.ui import viewer_tab

EXAMPLE = Path(__file__).resolve().parent.parent / "assets" / "traces" / "courier-short.diffusion.json"


def base() -> dict:
    return mv.load_trace(EXAMPLE).to_dict()


def nan_confidence(d):
    d["regions"][0]["tokens"][0]["confidence"] = float("nan")


def infinite_wall(d):
    d["metrics"]["wall_s"] = float("inf")


def nfe_off(d):
    d["metrics"]["nfe"] += 3


def commit_forward_off(d):
    t = d["regions"][0]["tokens"][0]
    t["commit_forward"] = t["commit_forward"] + 1


def position_outside_block(d):
    s = d["steps"][0]  # block 0 at block length 32: positions 0..31
    s["positions"][0] = 40


def box_off_page(d):
    d["regions"][0]["tokens"][0]["box"] = [150.0, 141.4, 9000.0, 185.2]


def region_off_page(d):
    d["regions"][0]["bbox"] = [-500.0, 141.4, 300.0, 185.2]


def inside_out_box(d):
    d["regions"][0]["bbox"] = [300.0, 141.4, 150.0, 185.2]


def block_length_zero(d):
    d["params"]["block_length"] = 0


def negative_steps(d):
    d["params"]["steps"] = -32


def tokens_9999(d):
    d["metrics"]["tokens"] = 9999


def text_contradicts(d):
    d["text"] = "a page these regions never decoded"


def rate_off(d):
    d["metrics"]["tokens_per_forward"] = 99.0


def more_calls_than_clock(d):
    d["metrics"]["batched_forwards"] = 1


CASES = {
    "block length 0": (block_length_zero, {}, "field 'params.block_length' is 0: must be a whole number of at least 1"),
    "steps -32": (negative_steps, {}, "field 'params.steps' is -32: must be a whole number of at least 1"),
    "tokens 9999": (tokens_9999, {}, "its counts disagree: metrics.tokens 9999 != 742 tokens in the regions"),
    "text": (text_contradicts, {}, "field 'text' is not the regions' texts joined by newlines"),
    "rate": (rate_off, {}, "its counts disagree: metrics.tokens_per_forward 99.0 != 10.7536 (tokens / nfe)"),
    "calls": (more_calls_than_clock, {}, "its counts disagree: metrics.batched_forwards 1: fewer model calls than the 4 forwards on the clock"),
    "nan": (nan_confidence, {}, "field 'regions[0].tokens[0].confidence' is nan: non-finite numbers are not allowed"),
    "inf": (infinite_wall, {}, "field 'metrics.wall_s' is inf: non-finite numbers are not allowed"),
    "nfe": (nfe_off, {}, "its counts disagree: metrics.nfe 72 != "),
    "commit": (commit_forward_off, {}, "its counts disagree: region 0 token 0: commit_forward"),
    "block": (position_outside_block, {}, "field 'steps[0].positions' holds 40, outside block 0 (positions 0 to 31"),
    "token box": (box_off_page, {}, "field 'regions[0].tokens[0].box' is [150, 141.4, 9000, 185.2], outside the 1275x1650 page"),
    "region box": (region_off_page, {}, "field 'regions[0].bbox' is [-500, 141.4, 300, 185.2], outside the 1275x1650 page"),
    "inside out": (inside_out_box, {}, "its right or bottom edge comes before its left or top"),
    "tokens": (lambda d: None, {"MUDIFF_MAX_NEW_TOKENS": "8"}, "has 9 tokens, past the limit of 8 per region"),
    "bytes": (lambda d: None, {"MUDIFF_MAX_TRACE_BYTES": "50000"}, "bytes (limit 50000)"),
}


@pytest.fixture(params=sorted(CASES))
def hostile(request, tmp_path, monkeypatch):
    change, env, reason = CASES[request.param]
    d = base()
    change(d)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(d))  # json.dumps writes NaN and Infinity as JavaScript does
    return path, reason


def test_the_unchanged_example_loads():
    assert mv.load_trace(EXAMPLE).n_tokens > 0


def test_load_trace_gives_the_reason(hostile):
    path, reason = hostile
    with pytest.raises(UserInputError) as err:
        mv.load_trace(path)
    assert reason in str(err.value) and "\n" not in str(err.value)


def test_cli_view_gives_the_reason(hostile, capsys):
    path, reason = hostile
    assert main(["view", str(path)]) != 0
    err = capsys.readouterr().err
    assert reason in err and err.count("\n") == 1, err


def test_viewer_tab_gives_the_reason(hostile):
    path, reason = hostile
    frames = viewer_tab.view_traces([str(path)])
    next(frames)  # the cleared screen
    status = next(frames)[viewer_tab.OUTPUTS.index("status")]  # the reason stays on screen after the toast
    assert status.startswith(f"⚠ **{viewer_tab.NOT_LOADED}:**") and "\n" not in status
    with pytest.raises(gr.Error) as err:
        next(frames)
    assert reason in err.value.message.replace("&#x27;", "'") and "\n" not in err.value.message
