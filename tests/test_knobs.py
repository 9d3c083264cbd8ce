"""A knob is declared once: registered in decoding/settings.py, it is a CLI flag, a control of the
app's Decode tab (reaching the decode through the tab's handler) and a key of the trace's params,
with no other edit (docs/architecture.md, "One knob from the UI to the model")."""

from __future__ import annotations

import json

import pytest

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.settings import DIFFUSION, KNOB, Knob, register_knob, unregister_knob
from tests.ui_support import DECODE_OUTPUTS, SAMPLE, launched_app, make_tiny_twins, named

DUMMY = Knob("dummy_gain", 1.0, float, "Dummy gain", "a knob only this test registers", 0.0, 2.0,
             decoders=(DIFFUSION,), step=0.05)


@pytest.fixture
def dummy():
    register_knob(DUMMY)
    try:
        yield DUMMY
    finally:
        unregister_knob(DUMMY.name)


def test_a_registered_knob_is_a_cli_flag_and_reaches_the_trace(dummy, tmp_path, capsys):
    from mudiff_viz.cli.main import main

    out = tmp_path / "t.json"
    rc = main(["decode", str(SAMPLE), "--model", "nano", "--dummy-gain", "0.5", "--max-new-tokens", "8",
               "--out", str(out)])
    assert rc == 0
    trace = Trace.from_dict(json.loads(out.read_text()))
    assert trace.params["dummy_gain"] == 0.5
    ar = tmp_path / "ar.json"
    assert main(["decode", str(SAMPLE), "--decoder", "ar", "--max-new-tokens", "4", "--out", str(ar)]) == 0
    assert "dummy_gain" not in json.loads(ar.read_text())["params"]  # only the decoders that read it
    capsys.readouterr()
    assert main(["decode", str(SAMPLE), "--dummy-gain", "3", "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: dummy gain must be in 0..2, got 3"]


def test_a_registered_knob_is_a_decode_tab_control_that_reaches_the_trace(dummy, tmp_path_factory):
    from gradio_client import Client, handle_file

    with launched_app(make_tiny_twins(tmp_path_factory.mktemp("models"))) as url:
        client = Client(url, verbose=False)
        params = client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/decode"]["parameters"]
        names = [p["parameter_name"] for p in params]
        assert "dummy_gain" in names and "block_length" in names
        out = named(client.predict(file=handle_file(str(SAMPLE)), page_number=1, spec="nano", decoder="diffusion",
                                   max_new_tokens=8, dummy_gain=0.25, api_name="/decode"), DECODE_OUTPUTS)
        trace_file = next(f for f in out["downloads"] if str(f).endswith(".json"))
        trace = Trace.from_dict(json.loads(open(trace_file).read()))
        assert trace.params["dummy_gain"] == 0.25 and trace.params["max_new_tokens"] == 8
        config = json.loads(__import__("urllib.request").request.urlopen(url + "config").read())
        ids = {c.get("props", {}).get("elem_id") for c in config["components"]}
        assert "decode-dummy-gain" in ids


def test_knob_values_cast_what_the_controls_send():
    from mudiff_viz.ui.controls import knob_values

    got = knob_values(["block_length", "threshold", "seed", "top_k"], [16.0, 1, None, ""])
    assert got == {"block_length": 16, "threshold": 1.0, "seed": KNOB["seed"].default, "top_k": KNOB["top_k"].default}
    assert knob_values(["block_length"], [16.5]) == {"block_length": 16.5}  # make_params refuses it, in words


def test_the_release_preset_sits_under_the_knobs_given():
    from mudiff_viz.decoding.settings import preset_knobs

    release = preset_knobs("release")
    assert {k: release[k] for k in ("temperature", "block_length", "steps", "threshold", "max_new_tokens")} == {
        "temperature": 1.0, "block_length": 32, "steps": 32, "threshold": 0.95, "max_new_tokens": 4096}
    ours = preset_knobs(None)
    assert {k for k in ours if ours[k] != release[k]} == {"temperature", "max_new_tokens", "preset"}  # 2 knobs + name
    assert preset_knobs("release", {"temperature": 0.0, "steps": None})["temperature"] == 0.0
    assert preset_knobs("release", None, max_new_tokens_limit=2048)["max_new_tokens"] == 2048
    with pytest.raises(UserInputError, match="unknown preset 'fast'"):
        preset_knobs("fast")


def test_the_nano_pairs_are_offered_page_mode_and_the_text_task_only(tmp_path):
    """The Decode tab offers each model the modes and tasks it can run and says why the others are
    off (mudiff_viz/ui/controls.py mode_offer); the decode refuses what the offer turns off."""
    from mudiff_viz.decoding.pipeline import decode_page, make_params
    from mudiff_viz.decoding.settings import MODES, TASKS
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.ui import controls
    from tests.test_real_models import write_diffusion_checkpoint
    from tests.ui_support import tiny_twin

    nano_dir = tiny_twin("diffusion", tmp_path / "nano-weights")
    mineru = write_diffusion_checkpoint(tmp_path / "mineru-diffusion")
    for spec in ("nano", "nano-char-ar", "nano-subword-diffusion", str(nano_dir)):
        offer = controls.mode_offer(spec, "layout")
        assert (offer.modes, offer.tasks) == (("page",), ("text",)), spec
        mode, task = controls.offer_props(offer, "layout", "table")
        assert mode == {"interactive": False, "value": "page", "info": controls.NANO_NOTE}
        assert task == {"interactive": False, "value": "text", "info": controls.NANO_TASK_NOTE}
    assert "no layout pass" in controls.NANO_NOTE and "table, formula" in controls.NANO_NOTE
    page = load_page(str(SAMPLE))
    for knobs in ({"mode": "layout"}, {"task": "table"}):  # what the note says is off is refused by the decode too
        with pytest.raises(UserInputError, match="layout prompt|reads text only"):
            decode_page(page, model=str(nano_dir), params=make_params(**knobs))
    # a MinerU model: every mode and task; in layout mode the task is off (its value kept) and says why
    assert controls.mode_offer(str(mineru), "page") == controls.ModeOffer(MODES, TASKS, True)
    mode, task = controls.offer_props(controls.mode_offer(str(mineru), "page"), "page", "table")
    assert mode["interactive"] and task == {"interactive": True, "value": "table", "info": KNOB["task"].help}
    mode, task = controls.offer_props(controls.mode_offer(str(mineru), "layout"), "layout", "table")
    assert mode == {"interactive": True, "value": "layout", "info": KNOB["mode"].help}
    assert task == {"interactive": False, "value": "table", "info": controls.LAYOUT_TASK_NOTE}
    # a real model's "not set up" entry, a hub id, a missing path: offered everything (a run says why not)
    for spec in ("setup:mineru2.5", "opendatalab/MinerU2.5-2509-1.2B", str(tmp_path / "nowhere")):
        assert controls.mode_offer(spec).modes == MODES
