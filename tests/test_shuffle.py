"""Semantic Shuffle: real synthetic pages rendered with PyMuPDF, no mocks.

The benchmark test needs the embedded nano weights (assets/models/nano-char-{ar,diffusion}, the default pair); it skips
with the reason when they are absent. ``MUDIFF_TEST_SHUFFLE_MODEL`` (e.g.
``diffusion=/tmp/dev-diffusion,ar=/tmp/dev-ar``) points it at other checkpoints during development.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mudiff_viz.cli.main import main
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import current
from mudiff_viz.core.trace import ModelRecord, PageRecord, RegionRecord, TokenRecord, Trace
from mudiff_viz.decoding.build import run_metrics
from mudiff_viz.inputs import synth
from mudiff_viz.inputs.pdf import render_in_process
from mudiff_viz.probes.bench import shuffle_figure, summarize, token_errors
from mudiff_viz.probes.shuffle import (
    image_lines,
    line_rng,
    permutation,
    shuffle_image,
    shuffle_page,
    shuffle_pdf,
)

ROOT = Path(__file__).resolve().parent.parent


def _text_layer(pdf: bytes):
    """Lines of page 0 in points (72 dpi: page pixels = points)."""
    return render_in_process(pdf, 0, 72, current()).lines


@pytest.fixture(scope="module")
def two_column_pdf() -> bytes:
    style = synth.PageStyle(font="times", size=10, columns=2, margin=60, leading=1.15)
    return synth.random_page(random.Random(11), "test", style=style).pdf


@pytest.fixture(scope="module")
def short_page() -> synth.SynthPage:
    doc = synth.documents("test")[3]
    return synth.make_page(doc.paragraphs[:3], synth.PageStyle(font="helvetica", size=12), heading="Short page")


# ---- the permutation (property tests) ---------------------------------------------------------

words = st.lists(st.sampled_from(["a", "b", "the", "of", "x1", "word", "z"]), max_size=25)


@settings(max_examples=150, deadline=None)
@given(words, st.floats(0, 1), st.integers(0, 2**31))
def test_permutation_is_a_permutation_and_deterministic(keys, level, seed):
    order = permutation(keys, level, random.Random(seed))
    assert sorted(order) == list(range(len(keys)))
    assert Counter(keys[i] for i in order) == Counter(keys)
    assert order == permutation(keys, level, random.Random(seed))
    moved = sum(1 for slot, src in enumerate(order) if slot != src)
    assert moved <= math.floor(level * len(keys) + 0.5)


@settings(max_examples=100, deadline=None)
@given(words, st.integers(0, 2**31))
def test_permutation_level0_identity_level1_changes(keys, seed):
    assert permutation(keys, 0.0, random.Random(seed)) == list(range(len(keys)))
    shuffled = [keys[i] for i in permutation(keys, 1.0, random.Random(seed))]
    if len(set(keys)) >= 2:
        assert shuffled != keys


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(), min_size=2, max_size=30, unique=True), st.integers(0, 2**31))
def test_permutation_levels_are_nested(keys, seed):
    """A higher level moves a superset of the words a lower level moves (same line, same seed)."""
    moved = [
        {s for s, src in enumerate(permutation(keys, lv, random.Random(seed))) if s != src}
        for lv in (0.25, 0.5, 1.0)
    ]
    assert moved[0] <= moved[1] <= moved[2]


def test_permutation_rejects_bad_levels():
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(UserInputError):
            permutation(["a", "b"], bad, random.Random(0))


# ---- PDF with a text layer --------------------------------------------------------------------


def test_pdf_level1_keeps_words_and_positions_and_changes_order(two_column_pdf):
    result = shuffle_pdf(two_column_pdf, 1.0, seed=5)
    before, after = _text_layer(two_column_pdf), _text_layer(result.data)
    assert len(after) == len(before) == len(result.lines) > 40
    long_lines = 0
    for old, new, plan in zip(before, after, result.lines):
        assert Counter(new.text.split()) == Counter(old.text.split())
        assert max(abs(a - b) for a, b in zip(old.bbox, new.bbox)) <= 2.0, (old.text, new.text)
        assert new.text.split() == plan.shuffled  # the ground truth is what the page shows
        if len(old.text.split()) >= 4:
            long_lines += 1
            assert new.text.split() != old.text.split()
    assert long_lines > 30


def test_pdf_level0_is_identity(two_column_pdf):
    assert shuffle_pdf(two_column_pdf, 0.0, seed=5).data == two_column_pdf
    # the re-rendered control (same redact-and-write path, nothing moved) reads and sits the same
    control = shuffle_pdf(two_column_pdf, 0.0, seed=5, rerender=True)
    for old, new in zip(_text_layer(two_column_pdf), _text_layer(control.data), strict=True):
        assert new.text == old.text
        assert max(abs(a - b) for a, b in zip(old.bbox, new.bbox)) <= 2.0


def test_pdf_same_seed_same_page(short_page):
    a, b = shuffle_pdf(short_page.pdf, 0.5, seed=9), shuffle_pdf(short_page.pdf, 0.5, seed=9)
    assert a.data == b.data
    other = shuffle_pdf(short_page.pdf, 0.5, seed=10)
    assert [ln.text for ln in _text_layer(other.data)] != [ln.text for ln in _text_layer(a.data)]


def test_pdf_keeps_images_and_line_art(short_page):
    import pymupdf

    doc = pymupdf.open(stream=short_page.pdf, filetype="pdf")
    page = doc[0]
    page.draw_rect(pymupdf.Rect(50, 700, 250, 740), color=(1, 0, 0), width=2)
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 8, 8), False)
    pix.set_rect(pix.irect, (0, 128, 255))
    page.insert_image(pymupdf.Rect(300, 700, 340, 740), pixmap=pix)
    data = doc.tobytes()
    doc.close()
    out = pymupdf.open(stream=shuffle_pdf(data, 1.0, seed=1).data, filetype="pdf")[0]
    assert len(out.get_images()) == 1
    assert any(d["rect"].intersects(pymupdf.Rect(50, 700, 250, 740)) for d in out.get_drawings())


def test_pdf_embedded_font_is_reused():
    font_file = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    if not os.path.isfile(font_file):
        pytest.skip(f"{font_file} not installed")
    doc = synth.documents("test")[5]
    page = synth.make_page(doc.paragraphs[:2], synth.PageStyle(size=11), font_file=font_file)
    result = shuffle_pdf(page.pdf, 1.0, seed=2)
    for old, new in zip(_text_layer(page.pdf), _text_layer(result.data), strict=True):
        assert Counter(new.text.split()) == Counter(old.text.split())
        assert max(abs(a - b) for a, b in zip(old.bbox, new.bbox)) <= 2.0


def test_untrusted_pdf_checks():
    import pymupdf

    with pytest.raises(UserInputError):
        shuffle_pdf(b"%PDF-1.7\n garbage", 1.0, 0)
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "secret words here now")
    locked = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="o", user_pw="u")
    with pytest.raises(UserInputError, match="password"):
        shuffle_pdf(locked, 1.0, 0)
    blank = pymupdf.open()
    blank.new_page()
    with pytest.raises(UserInputError, match="no text layer"):
        shuffle_pdf(blank.tobytes(), 1.0, 0)


def test_shuffle_page_ground_truth_is_the_shuffled_text_layer(short_page):
    sp = shuffle_page(short_page.pdf, 1.0, seed=4, dpi=72, trusted=True)
    assert sp.gt_text == "\n".join(" ".join(r.shuffled) for r in sp.result.lines)
    assert sp.gt_text != short_page.text
    assert Counter(sp.gt_text.split()) == Counter(short_page.text.split())


# ---- image without a text layer ---------------------------------------------------------------


@pytest.fixture(scope="module")
def scan(short_page):
    return short_page.render(110).image, short_page.text


def test_image_keeps_word_crops_per_line(scan):
    image, gt = scan
    lines = image_lines(image)
    shuffled, result = shuffle_image(image, 1.0, seed=3, gt_text=gt)
    before, after = np.asarray(image.convert("RGB")), np.asarray(shuffled)
    assert before.shape == after.shape
    inside = np.zeros(before.shape[:2], dtype=bool)
    changed = 0
    for line, rec in zip(image_lines(image, [len(t.split()) for t in gt.splitlines()]), result.lines):
        x0, y0, x1, y1 = line.box
        inside[y0:y1, x0:x1] = True
        crops_before = Counter(before[y0:y1, a:b].tobytes() for a, b in line.words)
        # walk the new layout: word widths in the new order, gaps in the old order
        x, crops_after = line.words[0][0], Counter()
        gap_widths = [c - b for (_, b), (c, _) in zip(line.words, line.words[1:])] + [0]
        for slot, src in enumerate(rec.order):
            width = line.words[src][1] - line.words[src][0]
            crops_after[after[y0:y1, x : x + width].tobytes()] += 1
            x += width + gap_widths[slot]
        assert crops_after == crops_before
        changed += rec.changed
    assert (before[~inside] == after[~inside]).all()  # nothing outside the lines moved
    assert changed >= 0.8 * len(lines)
    # ground truth follows the crops, line by line
    assert result.gt_text is not None
    for old, new in zip(gt.splitlines(), result.gt_text.splitlines(), strict=True):
        assert Counter(old.split()) == Counter(new.split())


def test_image_level0_identity_and_same_seed(scan):
    image, gt = scan
    same, result = shuffle_image(image, 0.0, seed=3, gt_text=gt)
    assert np.array_equal(np.asarray(same), np.asarray(image.convert("RGB")))
    assert result.gt_text == gt
    a, _ = shuffle_image(image, 0.5, seed=8)
    b, _ = shuffle_image(image, 0.5, seed=8)
    assert np.array_equal(np.asarray(a), np.asarray(b))


def test_image_ground_truth_unknown_when_lines_do_not_match(scan):
    image, gt = scan
    _, result = shuffle_image(image, 1.0, seed=3, gt_text="just one line")
    assert result.gt_text is None and "lines" in result.note


# ---- CLI --------------------------------------------------------------------------------------


def test_cli_shuffle_pdf_and_image(tmp_path, short_page, scan, capsys):
    src = tmp_path / "page.pdf"
    src.write_bytes(short_page.pdf)
    assert main(["shuffle", str(src), "--level", "1", "--seed", "2", "--out", str(tmp_path / "s.pdf")]) == 0
    assert Counter(" ".join(ln.text for ln in _text_layer((tmp_path / "s.pdf").read_bytes())).split()) == Counter(
        short_page.text.split()
    )
    image, gt = scan
    image.save(tmp_path / "scan.png")
    (tmp_path / "scan.txt").write_text(gt)
    assert main(["shuffle", str(tmp_path / "scan.png"), "--level", "1", "--out", str(tmp_path / "out.png")]) == 0
    assert (tmp_path / "out.png").is_file()
    assert Counter((tmp_path / "out.txt").read_text().split()) == Counter(gt.split())
    # PDF -> PNG: the page is rendered (isolated renderer) and its ground truth written beside it
    assert main(["shuffle", str(src), "--level", "1", "--dpi", "60", "--out", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG")
    assert Counter((tmp_path / "p.txt").read_text().split()) == Counter(short_page.text.split())


def _exit_code(argv: list[str]) -> int:
    """main()'s exit code; argparse errors leave through SystemExit."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--level", "2"], "level must be in [0, 1]"),
        (["--level", "x"], "level must be a number"),
        (["--out", "{tmp}/x.jpg"], "must end in .pdf or .png"),
        (["--out", "{tmp}/x.pdf", "--input", "{tmp}/missing.pdf"], "no such file"),
    ],
)
def test_cli_shuffle_errors_are_one_line_exit_2(tmp_path, short_page, capsys, argv, message):
    src = tmp_path / "page.pdf"
    src.write_bytes(short_page.pdf)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if "--input" in argv:
        i = argv.index("--input")
        src = argv[i + 1]
        argv = argv[:i] + argv[i + 2 :]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "o.pdf")]
    code = _exit_code(["shuffle", str(src), *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and message in err


def test_cli_shuffle_bench_input_errors(tmp_path, scan, short_page, capsys):
    image, _ = scan
    image.save(tmp_path / "lonely.png")  # no lonely.txt beside it
    assert _exit_code(["shuffle-bench", str(tmp_path / "lonely.png"), "--out", str(tmp_path / "o")]) == 2
    assert "ground truth" in capsys.readouterr().err
    (tmp_path / "p.pdf").write_bytes(short_page.pdf)
    assert _exit_code(["shuffle-bench", str(tmp_path / "p.pdf"), "--levels", "0,2", "--out", str(tmp_path / "o")]) == 2
    assert "level must be in [0, 1]" in capsys.readouterr().err
    assert _exit_code(["shuffle-bench", str(tmp_path / "p.pdf"), "--model", "diffusion=x", "--out", str(tmp_path)]) == 2
    assert "no model given for decoder(s) ar" in capsys.readouterr().err


# ---- benchmark --------------------------------------------------------------------------------


def test_token_errors_counts_confidently_wrong_tokens():
    def tok(t, c, stop=False):
        return TokenRecord(text=t, id=0, commit_forward=0, commit_time_s=0.0, confidence=c, stop=stop)

    regions = [
        RegionRecord(
            bbox=[0, 0, 1, 1], text="cat", tokens=[tok("c", 0.99), tok("a", 0.5), tok("t", 0.95), tok("", 1.0, True)]
        ),
        RegionRecord(bbox=[0, 0, 1, 1], text="ox", tokens=[tok("o", 0.97), tok("x", 0.3)]),
    ]
    trace = Trace(decoder="ar", model=ModelRecord("m", "m", 0.0), params={}, page=PageRecord(1, 1), text="cat\nox",
                  metrics=run_metrics(regions, 6, 0, 6, 0.1, 0.0, "cat\nox", None),
                  regions=regions, steps=[])
    assert token_errors(trace, "cat\nox") == (0, 0)
    assert token_errors(trace, "cut\nox") == (1, 0)  # 'a' substituted, confidence 0.5
    assert token_errors(trace, "ca\nox") == (1, 1)  # 't' extra, confidence 0.95
    assert token_errors(trace, "cat\no") == (1, 0)  # 'x' extra, confidence 0.3


def test_summary_and_figure_from_rows():
    rows = [
        {"page": p, "level": lv, "seed": s, "decoder": d, "cer": 0.1 + lv * (0.3 if d == "ar" else 0.1) + 0.01 * s,
         "error_tokens": 10, "confident_error_tokens": 6 if d == "ar" else 2}
        for p in ("a", "b") for s in (0, 1, 2) for lv in (0.0, 0.5, 1.0) for d in ("diffusion", "ar")
    ]
    summary = summarize(rows)
    assert summary["ar"]["cer_change"] == pytest.approx(0.3)
    assert summary["diffusion"]["cer_change"] == pytest.approx(0.1)
    assert summary["ar"]["confident_error_share"] == pytest.approx(0.6)
    assert summary["diffusion"]["cer_seed_range"][1.0] == pytest.approx([0.2, 0.22])
    fig = shuffle_figure(rows)
    assert {t.name for t in fig.data} >= {"diffusion", "ar"}


def _bench_models() -> str:
    from models.registry import SHIPPED

    override = os.environ.get("MUDIFF_TEST_SHUFFLE_MODEL")
    if override:
        return override
    missing = [
        d for d in (f"{SHIPPED['nano']}-ar", f"{SHIPPED['nano']}-diffusion")
        if not (ROOT / "assets" / "models" / d / "model.safetensors").is_file()
    ]
    if missing:
        pytest.skip(f"embedded nano weights absent: assets/models/{', assets/models/'.join(missing)} (still training)")
    return "nano"


def test_benchmark_writes_rows_for_both_decoders_at_every_level(tmp_path, capsys):
    import torch

    model = _bench_models()
    torch.set_num_threads(1)
    doc = synth.documents("test")[7]
    page = synth.make_page(doc.paragraphs[:1], synth.PageStyle(font="courier", size=12))
    src = tmp_path / "page.pdf"
    src.write_bytes(page.pdf)
    out = tmp_path / "bench"
    code = main(["shuffle-bench", str(src), "--levels", "0,0.5,1", "--seeds", "1", "--model", model, "--out", str(out)])
    assert code == 0
    rows = json.loads((out / "results.json").read_text())
    expected = {(d, lv) for d in ("diffusion", "ar") for lv in (0.0, 0.5, 1.0)}
    assert {(r["decoder"], r["level"]) for r in rows} == expected
    for r in rows:
        assert {"page", "level", "seed", "decoder", "cer", "tokens", "nfe", "wall_s", "mean_confidence"} <= set(r)
        assert r["cer"] >= 0 and r["tokens"] > 0 and r["nfe"] > 0
    assert (out / "results.csv").read_text().count("\n") == len(rows) + 1
    assert "plotly" in (out / "figure.html").read_text()[:200000].lower()
    printed = capsys.readouterr().out
    assert "diffusion: CER" in printed and "ar: CER" in printed and "confidently wrong" in printed


def test_line_rng_is_stable():
    assert line_rng(1, 0, 2).random() == line_rng(1, 0, 2).random() != line_rng(1, 0, 3).random()


def test_isolated_shuffle_matches_in_process_and_obeys_limits(two_column_pdf, monkeypatch):
    """Uploads are shuffled in the PDF worker: same bytes and record as in-process, under its limits."""
    from mudiff_viz.core.limits import Limits
    from mudiff_viz.probes.shuffle import shuffle_pdf_isolated

    here, there = shuffle_pdf(two_column_pdf, 0.5, seed=3), shuffle_pdf_isolated(two_column_pdf, 0.5, seed=3)
    assert here.data == there.data and here.lines == there.lines
    with pytest.raises(UserInputError, match="longer than"):
        shuffle_pdf_isolated(two_column_pdf, 0.5, seed=3, limits=Limits(pdf_timeout_s=0.01))
    with pytest.raises(UserInputError, match="password-protected|corrupt PDF|damaged or truncated"):
        shuffle_pdf_isolated(b"%PDF-1.7\n garbage", 1.0, 0)
