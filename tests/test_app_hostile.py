"""Hostile uploads through the launched app (gradio_client): every bad file or trace is answered
with a gr.Error carrying the CLI's one-line message, the server keeps serving, and a good page
still decodes afterwards. The corpus is the one tests/test_hostile_inputs.py runs through the CLI.

The app is launched with a 2 MB upload cap (MUDIFF_MAX_UPLOAD_BYTES) so Gradio's own refusal of
oversized uploads, set from the same limit, is exercised too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from tests.test_cli import run_cli
from tests.test_hostile_inputs import CORPUS, HOSTILE_TRACES, js_pdf, png_bytes
from tests.ui_support import DECODE_OUTPUTS, SAMPLE, launched_app, make_tiny_twins, named

UPLOAD_CAP = 2_000_000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hostile-app")
    for name, (make, _) in CORPUS.items():
        (d / name).write_bytes(make())
    for name, (data, _) in HOSTILE_TRACES.items():
        (d / name).write_bytes(data)
    (d / "js.pdf").write_bytes(js_pdf())
    (d / "too-big.png").write_bytes(png_bytes(50, 50) + b"\0" * (UPLOAD_CAP + 1000))
    return d


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    old = os.environ.get("MUDIFF_MAX_UPLOAD_BYTES")
    os.environ["MUDIFF_MAX_UPLOAD_BYTES"] = str(UPLOAD_CAP)
    try:
        with launched_app(make_tiny_twins(tmp_path_factory.mktemp("models"))) as url:
            yield url
    finally:
        if old is None:
            os.environ.pop("MUDIFF_MAX_UPLOAD_BYTES", None)
        else:
            os.environ["MUDIFF_MAX_UPLOAD_BYTES"] = old


@pytest.fixture(scope="module")
def client(app_url):
    from gradio_client import Client

    return Client(app_url, verbose=False)


def decode(client, path: Path | str, decoder: str = "ar"):
    from gradio_client import handle_file

    return client.predict(file=handle_file(str(path)), page_number=1, spec="nano", decoder=decoder, block_length=8,
                          steps=8, threshold=0.9, temperature=0.0, strategy="low_confidence_dynamic", seed=0,
                          max_new_tokens=16, api_name="/decode")


def library_message(path: Path) -> str:
    """What the CLI prints after 'error: ' for this file: the message of the same load call."""
    from mudiff_viz.inputs.pages import load_page

    with pytest.raises(UserInputError) as exc:
        load_page(path)
    return str(exc.value)


def app_error(call) -> str:
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError) as exc:
        call()
    return str(exc.value)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_hostile_upload_gets_the_cli_message(client, corpus, name):
    message = app_error(lambda: decode(client, corpus / name))
    assert message == library_message(corpus / name)
    assert CORPUS[name][1] in message and "\n" not in message


@pytest.mark.parametrize("name", ["encrypted.pdf", "bomb.png"])
def test_the_cli_prints_the_same_line(client, corpus, name, tmp_path):
    r = run_cli("decode", str(corpus / name), "--out", str(tmp_path / "t.json"), timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == "error: " + app_error(lambda: decode(client, corpus / name))


def clock_bomb(field: str, value: int) -> bytes:
    """A valid little trace with one clock value replaced: the loader accepts it, the player must not."""
    import json

    from mudiff_viz.decoding.diffusion import decode_diffusion
    from mudiff_viz.decoding.settings import DecodeParams
    from tests.fixed_backend import FixedBackend, FixedPage

    b = FixedBackend(seed=2, n_rows=2)
    d = decode_diffusion(b, FixedPage(), b.regions(None), DecodeParams(block_length=8, steps=4, max_new_tokens=16)).to_dict()
    if field == "forward":
        d["steps"][0]["forward"] = value
    else:
        d["regions"][0]["tokens"][0]["commit_forward"] = value
    return json.dumps(d).encode()


CLOCK_BOMBS = {
    "huge-forward.json": (lambda: clock_bomb("forward", 10**9), "'steps[0].forward' is 1000000000"),
    "huge-commit.json": (lambda: clock_bomb("commit_forward", 10**9), "'regions[0].tokens[0].commit_forward' is 1000000000"),
    "negative-forward.json": (lambda: clock_bomb("forward", -3), "'steps[0].forward' is -3"),
}


@pytest.mark.parametrize("name", sorted(CLOCK_BOMBS))
def test_clock_bomb_trace_is_refused_before_any_allocation(client, tmp_path, name):
    """One step claiming forward 10^9 in a 10 kB trace would make a 10^9-long payload (gigabytes)."""
    from gradio_client import handle_file

    make, message = CLOCK_BOMBS[name]
    path = tmp_path / name
    path.write_bytes(make())
    got = app_error(lambda: client.predict(files=[handle_file(str(path))], page_file=None, api_name="/view_trace"))
    assert message in got and got.startswith("invalid trace: ")
    r = run_cli("view", str(path), "--html", str(tmp_path / "r.html"), timeout=60)
    assert r.returncode == 2 and message in r.stderr


@pytest.mark.parametrize("name", sorted(HOSTILE_TRACES))
def test_hostile_trace_in_the_viewer(client, corpus, name):
    from gradio_client import handle_file

    with pytest.raises(UserInputError) as lib:
        Trace.load(corpus / name)
    message = app_error(lambda: client.predict(files=[handle_file(str(corpus / name))], page_file=None,
                                               api_name="/view_trace"))
    assert message == str(lib.value) and HOSTILE_TRACES[name][1] in message


def test_hostile_pages_in_the_other_tabs(client, corpus):
    from gradio_client import handle_file

    message = app_error(lambda: client.predict(file=handle_file(str(corpus / "encrypted.pdf")), page_number=1,
                                               spec_diffusion="nano", spec_ar="nano", block_length=8, steps=8,
                                               threshold=0.9, strategy="low_confidence_dynamic", max_new_tokens=16,
                                               api_name="/compare"))
    assert message == "PDF is password-protected"
    message = app_error(lambda: client.predict(file=handle_file(str(corpus / "many-pages.pdf")), page_number=1,
                                               level=1.0, seed=0, spec="nano", block_length=8, steps=8, threshold=0.9,
                                               max_new_tokens=16, api_name="/shuffle"))
    assert message == library_message(corpus / "many-pages.pdf")


def test_javascript_pdf_decodes_as_plain_text(client, corpus):
    out = named(decode(client, corpus / "js.pdf"), DECODE_OUTPUTS)
    trace = Trace.load(out["downloads"][0])
    assert trace.gt_text == "<script>alert(1)</script> <b>bold</b>"
    assert out["player"]["regions"][0]["gt"] == trace.gt_text  # data for textContent, never markup
    assert "<script" not in out["status"]  # the status line carries no page or model text


def test_oversized_upload_is_refused_by_gradio(client, app_url, corpus):
    """launch(max_file_size=limits.max_upload_bytes): the server answers 413 before any callback, and
    the config tells clients the cap (gradio_client refuses to send the file at all)."""
    import httpx

    with pytest.raises(ValueError, match=f"exceeds the maximum file size of {UPLOAD_CAP} bytes"):
        decode(client, corpus / "too-big.png")
    with (corpus / "too-big.png").open("rb") as fh:
        r = httpx.post(app_url + "gradio_api/upload", files={"files": ("too-big.png", fh, "image/png")})
    assert r.status_code == 413
    assert httpx.get(app_url + "config").json()["max_file_size"] == UPLOAD_CAP


def test_good_page_decodes_after_all_that(client, corpus):
    for name in ("bomb.png", "corrupt.pdf", "empty.png"):
        app_error(lambda: decode(client, corpus / name))
    out = named(decode(client, SAMPLE, decoder="diffusion"), DECODE_OUTPUTS)
    assert out["player"]["kind"] == "mudiff-player" and len(out["player"]["regions"]) == 15
    assert Trace.load(out["downloads"][0]).page.source == "courier-short.pdf" and "CER" in out["status"]


def raw_call(app_url: str, api: str, data_text: str) -> dict:
    """One call of the raw HTTP API with a JSON body written by hand (gradio_client cannot send NaN,
    Infinity or an input count of its own choosing); the final event's data."""
    import json

    import httpx

    r = httpx.post(app_url + f"gradio_api/call/{api}", content='{"data": ' + data_text + "}",
                   headers={"content-type": "application/json"}, timeout=60)
    r.raise_for_status()
    stream = httpx.get(app_url + f"gradio_api/call/{api}/{r.json()['event_id']}", timeout=120).text
    events = [line for line in stream.splitlines() if line.startswith(("event:", "data:"))]
    return {"event": events[-2].split(":", 1)[1].strip(), "data": json.loads(events[-1].split(":", 1)[1])}


def raw_inputs(client, app_url, api: str, **override: str) -> str:
    """The endpoint's inputs as a JSON list with its defaults, the bundled sample as the page, and
    ``override`` (raw JSON text per parameter)."""
    import json

    import httpx

    params = client.view_api(return_format="dict", print_info=False)["named_endpoints"][api]["parameters"]
    with SAMPLE.open("rb") as fh:
        uploaded = httpx.post(app_url + "gradio_api/upload", files={"files": ("s.pdf", fh, "application/pdf")}).json()[0]
    page = json.dumps({"path": uploaded, "meta": {"_type": "gradio.FileData"}})
    values = [override.get(p["parameter_name"], page if p["parameter_name"] == "file" else json.dumps(p.get("parameter_default")))
              for p in params]
    return "[" + ", ".join(values) + "]"


RAW_API_CASES = {  # (endpoint, parameter, raw JSON value) -> the one line the client reads
    "page-abc": ("/decode", "page_number", '"abc"', "PDF page must be a number, got 'abc'"),
    "page-nan": ("/decode", "page_number", "NaN", "PDF page must be a finite number, got nan"),
    "page-infinity": ("/decode_check", "page_number", "Infinity", "PDF page must be a finite number, got inf"),
    "page-fraction": ("/decode_check", "page_number", "1.5", "PDF page must be a whole number, got 1.5"),
    "seed-nan": ("/decode", "seed", "NaN", "Seed must be a finite number, got nan"),
    "block-nan": ("/decode", "block_length", "NaN", "Block length must be a finite number, got nan"),
    "degrade-dpi-nan": ("/decode", "degrade_dpi", "NaN", "must be a finite number, got nan"),
    "compare-steps-infinity": ("/compare", "steps", "-Infinity", "must be a finite number, got -inf"),
    "shuffle-seed-nan": ("/shuffle", "seed", "NaN", "must be a finite number, got nan"),
    "model-nul": ("/decode", "spec", '"na\\u0000no"', "Model holds a NUL byte: 'na\\x00no'"),
    "model-long": ("/decode", "spec", '"' + "x" * 5000 + '"', "Model is 5,000 characters long (limit 4,096): 'xxx"),
    "model-unknown-long": ("/decode", "spec", '"' + "y" * 1000 + '"', "yyy…"),
}


@pytest.mark.parametrize("case", sorted(RAW_API_CASES))
def test_raw_api_inputs_are_refused_in_one_line(client, app_url, case, caplog, capfd):
    """NaN, Infinity, "abc", fractions, NUL bytes and long strings over the raw API: one readable line
    for the client (never Gradio's null), one line in the server log, no traceback."""
    import logging

    api, param, raw, expected = RAW_API_CASES[case]
    with caplog.at_level(logging.WARNING):
        got = raw_call(app_url, api.strip("/"), raw_inputs(client, app_url, api, **{param: raw}))
    assert got["event"] == "error"
    message = got["data"]["error"]
    assert message and expected in message and "\n" not in message and len(message) < 300, message
    refused = [r.getMessage() for r in caplog.records if r.name.startswith("mudiff_viz")]
    assert refused == [f"refused input: {message}"]
    assert "Traceback" not in capfd.readouterr().err


def test_a_raw_call_with_too_few_inputs_is_one_line(client, app_url, capfd):
    got = raw_call(app_url, "decode", "[1]")
    needed = len(client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/decode"]["parameters"])
    assert got["data"]["error"] == (f"An event handler (run_decode) didn't receive enough input values (needed: {needed}, "
                                    "got: 1).")
    assert "Traceback" not in capfd.readouterr().err


def test_corpus_path_with_a_nul_byte_or_too_long_is_one_line(client, app_url):
    got = raw_call(app_url, "open_corpus", '["/tmp/x\\u0000y", null, "all runs (pooled)"]')
    assert got["data"]["error"] == "Store folder on the server holds a NUL byte: '/tmp/x\\x00y'"
    message = app_error(lambda: client.predict(path_text="/" + "a" * 3000, upload=None, run="all runs (pooled)",
                                               api_name="/open_corpus"))
    assert message.endswith("is outside the folders this app may open stores from (set MUDIFF_CORPUS_ROOTS to allow more)")
    assert len(message) < 200


def test_a_user_error_is_one_log_line_and_a_bug_keeps_its_traceback(client, corpus, caplog, capfd):
    import logging

    with caplog.at_level(logging.WARNING):
        message = app_error(lambda: decode(client, corpus / "encrypted.pdf"))
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("mudiff_viz")]
    assert lines == [f"user error in run_decode: {message}"] or lines[-1].endswith(message), lines
    assert "Traceback" not in capfd.readouterr().err
    from mudiff_viz.ui.common import user_errors

    @user_errors
    def buggy():
        return {}["missing"]

    import gradio as gr

    with pytest.raises(gr.Error) as exc:
        buggy()
    assert exc.value.print_exception and exc.value.message == "internal failure: KeyError: 'missing'"
    assert isinstance(exc.value.__cause__, KeyError)  # Gradio prints this traceback in the server log
