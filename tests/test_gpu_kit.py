"""The GPU training kit on CPU: the atlas draws lines the way PyMuPDF + crop_line do, and the
device command trains, evaluates and writes weights the runtime loads, importing no PDF code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from rapidfuzz.distance import Levenshtein

from models.nano.model import NanoOCR
from models.nano.preprocess import collate, crop_line, ink_levels, reference_height, to_gray
from models.nano.tokenizer import CharTokenizer
from models.nano.weights import load_model
from mudiff_viz.inputs import synth
from nano_training.atlas import GlyphAtlas, render_lines
from nano_training.gpu_run import SHIPPED_AR, fp16_bytes, largest_config, unpack

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def atlas() -> GlyphAtlas:
    return GlyphAtlas()


@pytest.fixture(scope="module")
def reader() -> NanoOCR:
    return load_model(SHIPPED_AR)[0]


def ctc_read(model: NanoOCR, lines: list[np.ndarray]) -> list[str]:
    """The shipped twin's CTC head, greedy: what its vision encoder reads on each line."""
    chars = CharTokenizer()
    images, widths = collate(lines, multiple=64)
    with torch.no_grad():
        enc_len = (widths + 3) // 4
        best = model.ctc_head(model.encoder(images, enc_len)).argmax(-1)
    out = []
    for row, n in zip(best.tolist(), enc_len.tolist()):
        ids, prev = [], None
        for t in row[:n]:
            if t != prev and t != chars.pad_id:
                ids.append(t)
            prev = t
        out.append(chars.decode(ids))
    return out


def page_and_atlas_lines(atlas: GlyphAtlas, family: str, size: float, dpi: float, leading: float = 1.25, n: int = 8):
    """The first ``n`` lines of a held-out page: cropped from PyMuPDF's render, and drawn by the atlas
    with the same texts, the same distances between lines and the page's reference ink height."""
    style = synth.PageStyle(font=family, size=size, heading=False, leading=leading)
    pars = synth.merge_paragraphs(list(synth.documents("test")[5].paragraphs) * 3, __import__("random").Random(0))
    page = synth.make_page(pars, style).render(dpi)
    gray = to_gray(page.image)
    levels = ink_levels(gray)
    ref = reference_height(gray, [ln.bbox for ln in page.lines], levels)
    lines = page.lines[:n]
    pdf = [crop_line(gray, ln.bbox, levels, ref).pixels for ln in lines]
    # baseline to baseline, in points, from the text layer (a paragraph gap is 1.5 pitches)
    gaps = [None] + [(b.bbox[3] - a.bbox[3]) * 72 / page.dpi for a, b in zip(lines, lines[1:])]
    drawn, _, _ = render_lines(atlas, [ln.text for ln in lines], atlas.face(family), size, dpi,
                               torch.Generator().manual_seed(0), ref_height=ref, gaps=gaps)
    return [ln.text for ln in lines], pdf, [d.numpy() for d in drawn]


@pytest.mark.parametrize("family,size,dpi", [("helvetica", 10.0, 150.0), ("times", 11.0, 150.0),
                                             ("courier", 10.0, 150.0), ("times", 9.0, 100.0)])
def test_atlas_lines_match_pymupdf_renders(atlas, reader, family, size, dpi):
    # pixels, at a loose leading (no neighbour's ink inside a line's box, so both crops are cut alike):
    # the crop's scale agrees to 6% (hinting can move an ink edge by a page pixel: 5% at 11 pt, 150 DPI),
    # and once scaled to the same size the images differ by under 7.5% of full ink on average
    # (measured 2.7-6.6% over 8 settings; sub-pixel phases and hinting the atlas does not reproduce)
    texts, pdf, drawn = page_and_atlas_lines(atlas, family, size, dpi, leading=1.45)
    ratios, diffs = [], []
    for a, b in zip(pdf, drawn):
        ratios.append(b.shape[1] / a.shape[1])
        scaled = F.interpolate(torch.from_numpy(b).float()[None, None], size=a.shape, mode="bilinear",
                               align_corners=False)[0, 0].numpy()
        diffs.append(np.abs(a.astype(float) - scaled).mean() / 255)
    assert max(abs(r - 1) for r in ratios) < 0.06, ratios
    assert np.mean(diffs) < 0.075 and max(diffs) < 0.1, diffs
    # reading, at the default leading (neighbours' ink in the crops): the shipped CTC head reads both
    # about equally, and well
    texts, pdf, drawn = page_and_atlas_lines(atlas, family, size, dpi, leading=1.25)
    cer = {}
    for name, lines in (("pdf", pdf), ("atlas", drawn)):
        got = ctc_read(reader, lines)
        cer[name] = sum(Levenshtein.distance(g, t) for g, t in zip(got, texts)) / sum(len(t) for t in texts)
    assert cer["pdf"] < 0.03 and cer["atlas"] < 0.03, cer
    assert abs(cer["pdf"] - cer["atlas"]) < 0.01, cer


def test_largest_shape_fits_the_weights_cap():
    base = load_model(SHIPPED_AR)[0].cfg
    cfg = largest_config(base, 25.0)
    assert fp16_bytes(cfg) <= 25e6
    assert fp16_bytes(cfg) > 2.5 * fp16_bytes(base)  # the shipped twin is 9.3 MB
    assert cfg.d_model % cfg.n_heads == 0 and cfg.d_model // cfg.n_heads == 32
    for shape in (cfg, base):  # the size rule counts what a built model holds
        with torch.device("meta"):
            assert fp16_bytes(shape) == 2 * sum(p.numel() for p in NanoOCR(shape).parameters())


RUNNER = """
import runpy, sys
sys.argv = ["gpu_run", *sys.argv[1:]]
runpy.run_module("nano_training.gpu_run", run_name="__main__")
FORBIDDEN = ("fitz", "pymupdf", "PIL", "rapidfuzz", "mudiff_viz.inputs", "nano_training.data", "nano_training.train")
print("IMPORTED", sorted(m for m in sys.modules if m.startswith(FORBIDDEN)))
"""


def test_gpu_run_trains_a_tiny_pair_on_cpu_and_writes_loadable_weights(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-c", RUNNER, "--budget-s", "240", "--out", str(out), "--d-model", "64", "--layers", "2",
           "--steps", "36", "--page-lines", "3", "--pool-pages", "3", "--val-pages", "1", "--batch-cols", "3000",
           "--threads", "1", "--log-every", "6", "--device", "cpu"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "IMPORTED []" in proc.stdout  # no PDF renderer, PIL or rapidfuzz on the device path
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    for phase in ("ar", "diffusion"):
        evals = [r["eval"]["val_ce"] for r in rows if r.get("phase") == phase and "eval" in r]
        assert len(evals) >= 2 and evals[-1] < evals[0] - 0.1, (phase, evals)
    shards = sorted(p.name for p in out.glob("*.safetensors"))
    assert shards == ["ar.0.safetensors", "diffusion.0.safetensors"]
    assert not list(out.glob("*.tmp"))
    pair = unpack(out, tmp_path / "tiny")
    assert [p.name for p in pair] == ["tiny-ar", "tiny-diffusion"]
    for kind, path in zip(("ar", "diffusion"), pair):
        model, tok = load_model(path)
        assert model.cfg.kind == kind and model.cfg.d_model == 64 and tok.vocab_size == 2048
        # the vision side travelled unchanged in the diffusion phase (frozen) and started as the shipped twin's
    shipped = load_model(SHIPPED_AR)[0].state_dict()
    diffusion = load_model(pair[1])[0].state_dict()
    ar = load_model(pair[0])[0].state_dict()
    key = "encoder.stem_out.weight"
    assert torch.equal(diffusion[key], ar[key])
    assert not torch.equal(ar[key], shipped[key].float())  # the AR phase trained it
    # and the app's decoding pipeline runs the diffusion twin from its directory (what it reads is noise)
    from mudiff_viz.decoding.pipeline import decode_page
    from mudiff_viz.decoding.settings import DecodeParams

    page = synth.make_page(["A short paragraph."], synth.PageStyle(heading=False)).render(150)
    trace = decode_page(page, model=str(pair[1]), decoder="diffusion",
                        params=DecodeParams(block_length=16, steps=16, threshold=0.95, max_new_tokens=32))
    assert trace.steps


def test_unpack_refuses_a_partial_set(tmp_path):
    from nano_training.gpu_run import export, decoder_config

    base = load_model(SHIPPED_AR)[0].cfg
    model = NanoOCR(decoder_config(base, 320, 8))  # the kit's shape, 24.5 MB: 2 shards of at most 15 MiB
    export(model, tmp_path, "ar", {"step": 0})
    shards = sorted(tmp_path.glob("ar.*.safetensors"))
    assert len(shards) >= 2 and all(p.stat().st_size < 16 * 2**20 for p in shards)
    shards[-1].unlink()
    with pytest.raises(SystemExit, match="shards"):
        unpack(tmp_path, tmp_path / "x")


def test_damaged_atlas_lines_still_read(atlas, reader):
    """The device's scan damage (blur, contrast loss, noise, JPEG-like quantisation) at the strength
    of data.degrade's middle draws: the page's paper and ink levels and the shipped CTC head's reading
    come out as the same damage done to PyMuPDF's page with PIL (data.degrade's operations) gives them."""
    import io
    import random

    from PIL import Image, ImageFilter

    from nano_training.atlas import Damage, jpeg_like

    style = synth.PageStyle(font="times", size=10.0, heading=False, leading=1.25)
    pars = synth.merge_paragraphs(list(synth.documents("test")[5].paragraphs) * 3, random.Random(0))
    page = synth.make_page(pars, style).render(150.0)
    arr = np.asarray(Image.fromarray(to_gray(page.image)).filter(ImageFilter.GaussianBlur(0.7)), dtype=np.float32)
    arr = 45 + arr * (220 - 45) / 255.0 + np.random.default_rng(0).normal(0, 10, arr.shape).astype(np.float32)
    buf = io.BytesIO()
    Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).save(buf, format="JPEG", quality=60)
    gray = np.asarray(Image.open(buf).convert("L"))
    pdf_levels = ink_levels(gray)
    ref = reference_height(gray, [ln.bbox for ln in page.lines], pdf_levels)
    pdf_texts = [ln.text for ln in page.lines[:8]]
    pdf_read = ctc_read(reader, [crop_line(gray, ln.bbox, pdf_levels, ref).pixels for ln in page.lines[:8]])
    pdf_cer = sum(Levenshtein.distance(g, t) for g, t in zip(pdf_read, pdf_texts)) / sum(len(t) for t in pdf_texts)

    texts, _, clean = page_and_atlas_lines(atlas, "times", 10.0, 150.0)
    dmg = Damage(blur=0.7, contrast=(45.0, 220.0), noise=10.0, jpeg=60)
    gen = torch.Generator().manual_seed(1)
    drawn, _, levels = render_lines(atlas, texts, atlas.face("times"), 10.0, 150.0, gen, dmg,
                                    gaps=[None] + [12.5] * (len(texts) - 1))
    assert abs(levels[0] - pdf_levels[0]) < 10 and abs(levels[1] - pdf_levels[1]) < 10, (levels, pdf_levels)
    got = ctc_read(reader, [d.numpy() for d in drawn])
    cer = sum(Levenshtein.distance(g, t) for g, t in zip(got, texts)) / sum(len(t) for t in texts)
    assert cer < 0.03 and pdf_cer < 0.03 and abs(cer - pdf_cer) < 0.015, (cer, pdf_cer)
    w = min(clean[0].shape[1], drawn[0].shape[1])
    assert np.abs(clean[0][:, :w].astype(float) - drawn[0].numpy()[:, :w]).mean() > 3  # damage shows
    # JPEG-like quantisation: near-lossless at high quality, coarser at low
    img = torch.rand(1, 32, 64, generator=torch.Generator().manual_seed(0)) * 255
    err = {q: float((jpeg_like(img, q) - img).abs().mean()) for q in (95, 35)}
    assert err[95] < err[35]


def test_gpu_run_stops_cleanly_on_sigterm(tmp_path):
    """A ``timeout`` sends SIGTERM: the run finishes its step, evaluates, exports and exits 0."""
    import signal

    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "nano_training.gpu_run", "--budget-s", "600", "--out", str(out), "--d-model", "64",
           "--layers", "2", "--steps", "100000", "--page-lines", "3", "--pool-pages", "2", "--val-pages", "1",
           "--batch-cols", "3000", "--threads", "1", "--log-every", "2", "--device", "cpu"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    try:
        for line in proc.stdout:
            if " ar step 2 " in line:
                proc.send_signal(signal.SIGTERM)
                break
        rest = proc.communicate(timeout=300)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, rest[-2000:]
    log = (out / "train.log").read_text()
    assert "stopped by SIGTERM" in log and "(end of phase)" in log and "diffusion done" not in log
    assert [p.name for p in unpack(out, tmp_path / "stopped")] == ["stopped-ar"]


def test_gpu_run_from_the_shipped_ar_twin_trains_diffusion_only(tmp_path):
    """``--from-ar``: no AR phase; the diffusion twin keeps the given twin's shape and tokenizer."""
    from nano_training.gpu_run import main

    out = tmp_path / "out"
    main(["--budget-s", "300", "--out", str(out), "--from-ar", str(SHIPPED_AR), "--steps", "2", "--page-lines", "2",
          "--pool-pages", "2", "--val-pages", "1", "--batch-cols", "2000", "--threads", "1", "--device", "cpu"])
    assert sorted(p.name for p in out.glob("*.safetensors")) == ["diffusion.0.safetensors"]
    (twin,) = unpack(out, tmp_path / "cont")
    model, _ = load_model(twin)
    shipped = load_model(SHIPPED_AR)[0]
    assert model.cfg.kind == "diffusion" and model.cfg.d_model == shipped.cfg.d_model == 192
    assert model.cfg.n_layers == shipped.cfg.n_layers
