"""The launched app through gradio_client: decode a bundled sample, get a trace back, replay it.

The app runs on random-weight nano twins written to a temporary folder (see tests/ui_support.py),
so these tests need neither the trained weights nor a network.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mudiff_viz.core.errors import ModelLoadError
from mudiff_viz.core.trace import Trace, check_invariants
from tests.ui_support import (
    COMPARE_OUTPUTS,
    DECODE_OUTPUTS,
    ROOT,
    SAMPLE,
    VIEW_OUTPUTS,
    launched_app,
    make_tiny_twins,
    named,
)


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    models = make_tiny_twins(tmp_path_factory.mktemp("models"))
    with launched_app(models) as url:
        yield url


@pytest.fixture(scope="module")
def client(app_url):
    from gradio_client import Client

    return Client(app_url, verbose=False)


def decode_args(decoder="diffusion", **over) -> dict:
    from gradio_client import handle_file

    args = dict(file=handle_file(str(SAMPLE)), page_number=1, spec="nano", decoder=decoder, block_length=8, steps=8,
                threshold=0.9, temperature=0.0, strategy="low_confidence_dynamic", seed=0, max_new_tokens=24)
    args.update(over)
    return args


def decode(client, decoder="diffusion", **over) -> dict:
    return named(client.predict(**decode_args(decoder, **over), api_name="/decode"), DECODE_OUTPUTS)


@pytest.fixture(scope="module")
def decoded(client):
    return decode(client)


def test_decode_returns_player_payload_figures_and_downloads(decoded):
    status, payload = decoded["status"], decoded["player"]
    fig_order, fig_conf, fig_tpf = decoded["fig_order"], decoded["fig_conf"], decoded["fig_tpf"]
    trace_path, html_path = decoded["downloads"]
    assert "diffusion" in status and "tokens" in status and "CER" in status  # the sample PDF has a text layer
    assert payload["kind"] == "mudiff-player" and payload["decoder"] == "diffusion"
    assert payload["page"]["image"].startswith("data:image/jpeg;base64,")
    assert len(payload["regions"]) == 15  # courier-short.pdf: 15 text lines
    for fig in (fig_order, fig_conf, fig_tpf):
        assert fig["type"] == "plotly" and json.loads(fig["plot"])["data"]
    trace = Trace.load(trace_path)
    assert check_invariants(trace) == []
    assert trace.decoder == "diffusion" and trace.params["block_length"] == 8
    assert sum(1 for f in payload["slots"]["filler"] if not f) == trace.n_tokens
    html = Path(html_path).read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and "MudiffPlayer.mount" in html and "http" not in html.split("<script>")[1][:200]


def test_ar_decode(client):
    out = decode(client, decoder="ar")
    payload, trace = out["player"], Trace.load(out["downloads"][0])
    assert trace.decoder == "ar" and check_invariants(trace) == []
    assert payload["series"]["committed"] == payload["series"]["regions"]  # one token per line per forward


def test_viewer_replays_a_saved_trace_without_a_model(client, decoded):
    from gradio_client import handle_file

    trace_path = decoded["downloads"][0]
    out = named(client.predict(files=[handle_file(trace_path)], page_file=None, api_name="/view_trace"), VIEW_OUTPUTS)
    status, payload = out["status"], out["player"]
    assert payload["kind"] == "mudiff-player"
    assert payload["page"]["image"], "a trace of a bundled sample finds its page by hash"
    assert payload["slots"] == decoded["player"]["slots"]
    assert "diffusion" in status


def test_viewer_compares_two_traces(client, decoded):
    from gradio_client import handle_file

    ar_path = decode(client, decoder="ar")["downloads"][0]
    out = client.predict(files=[handle_file(decoded["downloads"][0]), handle_file(ar_path)], page_file=None,
                         api_name="/view_trace")
    payload = named(out, VIEW_OUTPUTS)["player"]
    assert payload["mode"] == "compare"
    assert [p["decoder"] for p in payload["panes"]] == ["ar", "diffusion"]  # AR first, whatever the upload order


def test_compare_endpoint(client):
    from gradio_client import handle_file

    out = client.predict(file=handle_file(str(SAMPLE)), page_number=1, spec_diffusion="nano", spec_ar="nano",
                         block_length=8, steps=8, threshold=0.9, strategy="low_confidence_dynamic", max_new_tokens=16,
                         api_name="/compare")
    out = named(out, COMPARE_OUTPUTS)
    payload, table = out["player"], out["table"]
    # AR, diffusion and (by default) the self-speculative decoder, on one clock
    assert payload["mode"] == "compare" and [p["decoder"] for p in payload["panes"]] == ["ar", "diffusion", "self-speculative"]
    assert not payload["partial"] and not any(p["partial"] for p in payload["panes"])
    assert table["headers"] == ["metric", "AR", "diffusion", "self-speculative"]
    assert any(r[0] == "CER vs ground truth" for r in table["data"])
    order = next(r for r in table["data"] if r[0].startswith("decoding order vs reading order"))
    assert order[1] == "1.00 (left to right)" and "(" in order[2]  # the number says what it means
    assert "exec" not in table["data"][0][1] and "eager" in table["data"][0][1]  # how the forwards ran
    # word-level diffs: HTML, never a word split across a highlight
    for key in ("diff_ar", "diff_diffusion", "diff_third"):
        assert out[key].count('class="mdiff"') == 1
    assert len(out["downloads"]) == 4  # three traces and the offline replay
    # the speculative decoder's verifier is the AR model; its tokens are AR's
    out = named(client.predict(file=handle_file(str(SAMPLE)), page_number=1, spec_diffusion="nano", spec_ar="nano",
                               third="speculative", max_new_tokens=16, api_name="/compare"), COMPARE_OUTPUTS)
    ar, spec = out["player"]["panes"][0], out["player"]["panes"][2]
    assert spec["decoder"] == "speculative" and spec["text"] == ar["text"]
    two = named(client.predict(file=handle_file(str(SAMPLE)), page_number=1, third="none", max_new_tokens=8,
                               api_name="/compare"), COMPARE_OUTPUTS)
    assert len(two["player"]["panes"]) == 2 and two["diff_third"] == ""


def test_compare_states_a_verdict_on_both_clocks_with_its_spread(client):
    """Interleaved rounds: the verdict names each decoder's forwards and seconds of decode, who is
    faster on wall time with the range over the rounds, how many fewer forwards, and why."""
    from gradio_client import handle_file

    out = named(client.predict(file=handle_file(str(SAMPLE)), page_number=1, third="speculative", rounds=3,
                               max_new_tokens=24, api_name="/compare"), COMPARE_OUTPUTS)
    verdict = out["verdict"]
    lines = [line for line in verdict.splitlines() if line.startswith("- **")]
    assert [line.split("**")[1] for line in lines] == ["diffusion", "speculative"]
    for line in lines:
        assert "forward" in line and " s of decode" in line and "**AR** in " in line
        assert re.search(r"faster on wall time\*\* \((one round|the same in all 3 rounds|[\d.]+–[\d.]+x over 3 rounds)"
                         r"|no winner on wall time", line), line
        assert re.search(r"x (fewer|more) forwards\*\*; one \S+ forward costs [\d.]+ AR forwards here", line), line
    assert "3 rounds, interleaved" in verdict
    # the player and the table show the last round, in plan order
    assert [p["decoder"] for p in out["player"]["panes"]] == ["ar", "diffusion", "speculative"]
    with pytest.raises(Exception, match=r"maximum value 5|rounds must be from 1 to 5"):
        client.predict(file=handle_file(str(SAMPLE)), page_number=1, rounds=9, api_name="/compare")


def test_decode_streams_frames_before_the_result(client):
    """The player gets the trace so far while the page decodes: partial frames with fewer tokens
    than the result arrive before it, under the result's stream id."""
    job = client.submit(**decode_args("diffusion", max_new_tokens=24), api_name="/decode")
    job.result()
    frames = [named(o, DECODE_OUTPUTS)["player"] for o in job.outputs()]
    final = frames[-1]
    assert final["kind"] == "mudiff-player" and not final["partial"]
    assert frames[0]["kind"] == "message"  # the first thing a run shows: the old result is gone
    partial = [f for f in frames if isinstance(f, dict) and f.get("partial")]
    assert partial, "no frame arrived before the decode finished"
    n_final = sum(1 for f in final["slots"]["filler"] if not f)
    assert sum(1 for f in partial[0]["slots"]["filler"] if not f) < n_final
    assert all(f["stream"] == final["stream"] for f in partial)


def test_decode_with_probes_outlines_the_occluded_words(client):
    out = decode(client, "ar", occlude_words="0, 3", degrade_dpi=120, probe_seed=1)
    trace = Trace.load(out["downloads"][0])
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.probes.perturb import page_words

    words = page_words(load_page(SAMPLE))
    assert [o.text for o in trace.page.occluded] == [words[0].text, words[3].text]
    assert len(trace.page.occluded) == 2 and set(trace.page.probes) == {"occlude", "degrade"}
    assert len(out["player"]["page"]["occluded"]) == 2
    status = out["status"].replace("\\", "")  # markdown escapes
    assert "2 words occluded" in status and "dpi=120" in status


def test_bad_probe_values_are_one_line_errors(client):
    with pytest.raises(Exception, match="occluded words are comma-separated word numbers"):
        decode(client, occlude_words="three")
    with pytest.raises(Exception, match="word 99999 does not exist"):
        decode(client, occlude_words="99999")


def test_bad_input_is_a_one_line_error(client, tmp_path):
    from gradio_client import handle_file

    bad = tmp_path / "not-a-trace.json"
    bad.write_text('{"schema_version": 1}')
    with pytest.raises(Exception, match="invalid trace"):
        client.predict(files=[handle_file(str(bad))], page_file=None, api_name="/view_trace")


def test_missing_nano_weights_say_what_to_do(tmp_path, monkeypatch):
    from models import registry
    from mudiff_viz.ui import models

    monkeypatch.setattr(registry, "NANO_DIR", tmp_path)
    assert models.missing_twins() == ["diffusion", "ar"]
    assert models.choices()[0] == ("nano (weights not installed)", "nano")
    with pytest.raises(ModelLoadError, match="Trace viewer"):
        models.check("nano", "diffusion")


def test_picker_offers_each_installed_embedded_pair(tmp_path, monkeypatch):
    from models import registry
    from mudiff_viz.ui import models

    monkeypatch.setattr(registry, "NANO_DIR", tmp_path)
    for weights in ("nano-char", "nano-subword"):
        for twin in ("ar", "diffusion"):
            (tmp_path / f"{weights}-{twin}").mkdir()
            (tmp_path / f"{weights}-{twin}" / "config.json").write_text("{}")
            (tmp_path / f"{weights}-{twin}" / "model.safetensors").write_bytes(b"")
    specs = [spec for _, spec in models.choices()]
    assert specs[0] == "nano" and "nano-subword" in specs and "nano-char" not in specs  # nano is the char pair
    assert "subword pair" in dict((s, lab) for lab, s in models.choices())["nano-subword"]
    (tmp_path / "nano-subword-diffusion" / "model.safetensors").unlink()  # half a pair is not offered
    assert [spec for _, spec in models.choices()] == ["nano"]
    assert models.family_of("nano-subword-ar") == "nano-subword" and models.family_of("nano-ar") == "nano"
    with pytest.raises(ModelLoadError, match="nano-subword diffusion weights are not installed"):
        models.check("nano-subword", "diffusion")


def test_lessons_use_real_settings():
    from mudiff_viz.decoding.settings import DecodeParams
    from mudiff_viz.decoding.strategies import STRATEGIES
    from mudiff_viz.ui import howitworks

    assert howitworks.lesson_spec("nano-subword", ["nano", "nano-subword", "/models/x"]) == "nano-subword"
    assert howitworks.lesson_spec("nano-subword", ["nano", "/models/x"]) == "nano"
    assert len(howitworks.LESSONS) == 8 and {len(x.runs) for x in howitworks.LESSONS} == {1, 2, 3}
    for lesson in howitworks.LESSONS:
        for run in lesson.runs:
            s = howitworks.run_settings(run)
            assert s["strategy"] in STRATEGIES and 1 <= s["block_length"] <= 128 and 1 <= s["steps"] <= 128
            assert 0 <= s["threshold"] <= 1 and run.decoder in ("diffusion", "ar", "self-speculative", "speculative")
            assert run.family in howitworks.PAIR_NAMES
            DecodeParams.from_knobs(**{k: v for k, v in s.items() if k != "decoder"}).check()


def test_bundled_example_traces_are_valid():
    traces = sorted((ROOT / "assets" / "traces").glob("*.json"))
    if not traces:
        pytest.skip("no bundled traces: run python scripts/make_example_traces.py")
    decoders = set()
    for p in traces:
        t = Trace.load(p)
        assert check_invariants(t) == []
        decoders.add(t.decoder)
    assert decoders == {"ar", "diffusion"}


def test_readme_has_the_spaces_header():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    header = text.split("---\n")[1]
    for line in ("sdk: gradio", "sdk_version: 6.31.0", "app_file: app.py", 'python_version: "3.12"'):
        assert line in header
    body = text.split("---\n", 2)[2].lstrip()
    first_code = body[body.index("```bash") :].splitlines()[1:3]
    assert first_code[0].startswith("pip install -r requirements.txt && python app.py")


def test_launch_kwargs_leave_host_to_spaces(monkeypatch):
    from mudiff_viz.ui.app import launch_kwargs

    monkeypatch.delenv("MUDIFF_HOST", raising=False)
    monkeypatch.delenv("MUDIFF_PORT", raising=False)
    kw = launch_kwargs()
    assert "server_name" not in kw and "server_port" not in kw  # GRADIO_SERVER_NAME (0.0.0.0 on Spaces) applies
    assert kw["run_history"] is False
    monkeypatch.setenv("MUDIFF_HOST", "0.0.0.0")
    monkeypatch.setenv("MUDIFF_PORT", "7999")
    assert launch_kwargs()["server_name"] == "0.0.0.0" and launch_kwargs()["server_port"] == 7999


def test_cli_view_writes_the_offline_replay(tmp_path):
    from mudiff_viz.cli.main import main

    traces = sorted((ROOT / "assets" / "traces").glob("*.diffusion.json"))
    if not traces:
        pytest.skip("no bundled traces: run python scripts/make_example_traces.py")
    out = tmp_path / "replay.html"
    assert main(["view", str(traces[0]), "--html", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert "MudiffPlayer.mount" in html and "data:image/jpeg;base64," in html  # the bundled page, found by hash


def test_a_decode_cut_at_its_limit_says_so_in_the_summary_and_the_player(client):
    """Three tokens per line: every line of the sample stops at its limit, not at a stop token;
    the status line and the player's payload (its pane title) say where it was cut."""
    out = decode(client, decoder="ar", max_new_tokens=3)
    trace = Trace.load(out["downloads"][0])
    assert trace.metrics.truncated == "cut at 3 tokens, 15 of 15 regions"
    assert "⚠ truncated: cut at 3 tokens, 15 of 15 regions" in out["status"]
    assert out["player"]["metrics"]["truncated"] == trace.metrics.truncated


def test_release_settings_leave_the_ar_model_greedy(client):
    """What the Release settings button sends (preset release, temperature 1.0): the AR model runs as
    its client ships it, greedy, so two seeds give one text; the trace says what ran."""
    traces = [Trace.load(decode(client, decoder="ar", preset="release", temperature=1.0, seed=s)["downloads"][0])
              for s in (0, 1)]
    assert traces[0].text == traces[1].text
    for t in traces:
        assert t.params["preset"] == "release" and t.params["temperature"] == 0.0
        assert t.params["preset_for_weights"]["temperature"] == 0.0
    diffusion = Trace.load(decode(client, preset="release", temperature=1.0)["downloads"][0])
    assert diffusion.params["temperature"] == 1.0 and "preset_for_weights" not in diffusion.params
