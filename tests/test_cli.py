"""The CLI end to end as a user runs it (subprocesses), on a real model directory with random weights."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mudiff_viz.core.trace import Trace, check_invariants
from mudiff_viz.inputs import synth
from mudiff_viz.inputs.pages import load_page

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "mudiff_viz", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


@pytest.fixture(scope="module")
def pdf(tmp_path_factory) -> Path:
    pars = [d.paragraphs[0] for d in synth.documents("test")[:3]]
    sp = synth.make_page(pars, synth.PageStyle(font="helvetica", size=12), heading="A test page")
    path = tmp_path_factory.mktemp("pdf") / "page.pdf"
    path.write_bytes(sp.pdf)
    return path


@pytest.mark.parametrize("decoder", ["diffusion", "ar"])
def test_decode_writes_a_valid_trace(tiny_models, pdf, tmp_path, decoder):
    out = tmp_path / "t.json"
    r = run_cli("decode", str(pdf), "--model", str(tiny_models[decoder]), "--decoder", decoder,
                "--block-length", "8", "--steps", "4", "--out", str(out))
    assert r.returncode == 0, r.stderr
    trace = Trace.load(out)
    assert trace.decoder == decoder
    assert check_invariants(trace) == []
    assert len(trace.regions) == len(load_page(pdf).lines)  # one region per text-layer line
    assert trace.gt_text and "A test page" in trace.gt_text
    assert "NFE=" in r.stderr and "CER=" in r.stderr
    assert all(len(reg.tokens) <= 24 for reg in trace.regions)  # the model's max_answer caps a line
    v = run_cli("view", str(out))
    assert v.returncode == 0 and re.search(rf"{decoder} model=nano(-char)?-{decoder} ", v.stdout)


def test_decode_an_image_segments_lines(tiny_models, pdf, tmp_path):
    page = synth.SynthPage(pdf=pdf.read_bytes(), style=synth.PageStyle()).render(100)
    png = tmp_path / "scan.png"
    page.image.save(png)
    out = tmp_path / "t.json"
    r = run_cli("decode", str(png), "--model", str(tiny_models["ar"]), "--decoder", "ar", "--out", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    trace = Trace.load(out)
    assert len(trace.regions) == len(page.lines)
    assert trace.gt_text is None and "cer" not in trace.metrics


@pytest.mark.parametrize(
    "args,code,message",
    [
        (["decode", "missing.pdf", "--out", "x.json"], 2, "no such file"),
        (["decode", "README.md", "--out", "x.json"], 2, "not a PNG, JPEG or PDF"),
        (["decode", "assets/samples/courier-short.pdf", "--threshold", "1.5", "--out", "x.json"], 2, "threshold"),
        (["decode", "assets/samples/courier-short.pdf", "--strategy", "nope", "--out", "x.json"], 2, "invalid choice"),
        (["decode", "assets/samples/courier-short.pdf", "--model", "owner/model", "--out", "x.json"], 3, "hub downloads are off"),
        (["decode", "assets/samples/courier-short.pdf", "--model", "nope", "--out", "x.json"], 3, "unknown model"),
        (["decode", "assets/samples/courier-short.pdf", "--page", "0", "--out", "x.json"], 2, "page numbers start at 1"),
        (["decode", "assets/samples/courier-short.pdf", "--page", "2", "--out", "x.json"], 2,
         "page 2 does not exist: the PDF has 1 page"),
        (["shuffle", "assets/samples/courier-short.pdf", "--page", "0", "--out", "x.png"], 2, "page numbers start at 1"),
        (["view", "README.md"], 2, "not valid JSON"),
        (["frobnicate"], 2, "invalid choice"),
    ],
)
def test_errors_are_one_line_with_exit_codes(args, code, message, tmp_path):
    r = run_cli(*args, timeout=120)
    assert r.returncode == code, (r.returncode, r.stderr)
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr


@pytest.fixture(scope="module")
def two_pages(tmp_path_factory) -> Path:
    import pymupdf

    doc = pymupdf.open()
    for k in (1, 2):
        doc.new_page(width=300, height=120).insert_text((20, 40), f"This is page number {k}", fontname="cour", fontsize=11)
    path = tmp_path_factory.mktemp("two") / "two.pdf"
    doc.save(str(path))
    return path


def test_page_numbers_count_from_1(tiny_models, two_pages, tmp_path):
    """--page 2 is the second page, as the app's "PDF page" 2 is; the trace stores its 0-based index."""
    out = tmp_path / "t.json"
    r = run_cli("decode", str(two_pages), "--page", "2", "--model", str(tiny_models["ar"]), "--decoder", "ar",
                "--max-new-tokens", "4", "--out", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    trace = Trace.load(out)
    assert trace.page.page_index == 1 and "page number 2" in trace.gt_text


def test_ar_model_refuses_the_other_decoder(tiny_models, pdf, tmp_path):
    r = run_cli("decode", str(pdf), "--model", str(tiny_models["ar"]), "--decoder", "diffusion", "--out", str(tmp_path / "x.json"))
    assert r.returncode == 3 and "cannot run the diffusion decoder" in r.stderr


def test_view_refuses_contradicting_counts(tmp_path):
    from mudiff_viz.decoding.diffusion import decode_diffusion
    from mudiff_viz.decoding.settings import DecodeParams
    from tests.fixed_backend import FixedBackend, FixedPage

    backend = FixedBackend(seed=0)
    trace = decode_diffusion(backend, FixedPage(), backend.regions(None), DecodeParams(max_new_tokens=32))
    d = trace.to_dict()
    d["metrics"]["nfe"] += 3
    (tmp_path / "t.json").write_text(json.dumps(d))
    r = run_cli("view", str(tmp_path / "t.json"))  # counts that contradict each other: refused, in one line
    assert r.returncode == 2 and "invalid trace: its counts disagree: metrics.nfe" in r.stderr
    assert r.stderr.strip().count("\n") == 0
