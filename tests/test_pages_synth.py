"""Pages (PNG/JPEG/PDF, text layer), synthetic pages and line segmentation, on real renders."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest
from PIL import Image

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.inputs import synth
from mudiff_viz.inputs.pages import load_page
from mudiff_viz.inputs.regions import segment_lines


@pytest.fixture(scope="module")
def two_column_page() -> synth.SynthPage:
    style = synth.PageStyle(font="times", size=10, columns=2, margin=60, heading=True)
    return synth.random_page(random.Random(3), "test", style=style)


@pytest.mark.parametrize("font", list(synth.FONTS))
def test_ground_truth_matches_text_layer(font):
    for seed in range(2):
        sp = synth.random_page(random.Random(seed), "val", style=synth.PageStyle.random(random.Random(seed), fonts=[font]))
        page = sp.render(120)
        assert page.text == sp.text
        assert len(sp.text) > 500
        for line in page.lines:
            assert len(line.chars) == len(line.text)
            x0, y0, x1, y1 = line.bbox
            for ch in line.chars:
                if not ch.c.isspace():
                    cx = (ch.bbox[0] + ch.bbox[2]) / 2
                    assert x0 - 1 <= cx <= x1 + 1


def test_splits_are_disjoint_by_document_and_text():
    names = {s: {d.name for d in synth.documents(s)} for s in synth.SPLITS}
    assert not names["train"] & names["test"] and not names["train"] & names["val"] and not names["val"] & names["test"]
    train_text = {p for d in synth.documents("train") for p in d.paragraphs}
    test_text = {p for d in synth.documents("test") for p in d.paragraphs}
    assert len(test_text) > 200 and not train_text & test_text
    # the split is a pure function of the document name
    assert synth.split_of("module:json/decoder.py") == synth.split_of("module:json/decoder.py")


def test_pdf_pages_index_and_dpi(two_column_page, tmp_path):
    path = tmp_path / "p.pdf"
    path.write_bytes(two_column_page.pdf)
    p100, p200 = load_page(path, dpi=100), load_page(path, dpi=200)
    assert p200.width == pytest.approx(2 * p100.width, abs=2)
    assert p100.text == two_column_page.text
    # boxes scale with the DPI
    assert p200.lines[5].bbox[0] == pytest.approx(2 * p100.lines[5].bbox[0], rel=0.02)
    with pytest.raises(UserInputError, match="page 4 does not exist"):
        load_page(path, page_index=3)


def test_png_and_jpeg_load_without_text_layer(two_column_page, tmp_path):
    img = two_column_page.render(100).image
    for fmt, name in (("PNG", "a.png"), ("JPEG", "b.jpg")):
        buf = io.BytesIO()
        img.save(buf, format=fmt)
        (tmp_path / name).write_bytes(buf.getvalue())
        page = load_page(tmp_path / name)
        assert (page.width, page.height) == img.size
        assert page.lines is None and page.text is None
    # names are not trusted: a PNG called .pdf is still read as a PNG
    (tmp_path / "c.pdf").write_bytes((tmp_path / "a.png").read_bytes())
    assert load_page(tmp_path / "c.pdf").lines is None


def test_line_segmentation_on_a_render_without_text_layer(two_column_page):
    """Pixel segmentation finds the text-layer lines (two columns, heading) in reading order."""
    page = two_column_page.render(150)
    gray = np.asarray(page.image.convert("L"))
    boxes = segment_lines(gray)
    truth = [ln.bbox for ln in page.lines]
    assert len(boxes) == len(truth)
    for got, want in zip(boxes, truth):
        # the same line: vertical centres within a third of a line, left edges within a few pixels
        h = want[3] - want[1]
        assert abs((got[1] + got[3]) / 2 - (want[1] + want[3]) / 2) < h / 3
        assert abs(got[0] - want[0]) < 6


def test_segmentation_of_a_blank_page_is_empty():
    assert segment_lines(np.full((300, 200), 255, dtype=np.uint8)) == []


def test_dejavu_font_page_renders(tmp_path):
    font = "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"
    import os

    if not os.path.exists(font):
        pytest.skip("DejaVu Serif is not installed (Debian fonts-dejavu-core)")
    pars = [d.paragraphs[0] for d in synth.documents("test")[:6]]
    sp = synth.make_page(pars, synth.PageStyle(size=11), heading="Unseen font", font_file=font)
    page = sp.render(150)
    assert page.text == sp.text


def test_image_too_large_is_refused(tmp_path):
    img = Image.new("L", (6000, 6000), 255)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    (tmp_path / "big.png").write_bytes(buf.getvalue())
    from mudiff_viz.core.limits import Limits

    with pytest.raises(UserInputError, match="image too large"):
        load_page(tmp_path / "big.png", limits=Limits(max_image_pixels=10_000_000))


def test_pdf_worker_runs_from_any_directory(tmp_path, monkeypatch):
    """The isolated renderer is a child process: it must find the package wherever the app runs."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    page = load_page(root / "assets" / "samples" / "courier-short.pdf")
    assert page.lines and page.width > 0


# The inverse of each EXIF orientation's transform: storing ``upright`` this way and tagging it with
# the orientation means a correct reader gets ``upright`` back.
STORED_AS = {
    1: None,
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_90,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_270,
}


@pytest.mark.parametrize("orientation", sorted(STORED_AS))
def test_every_exif_orientation_loads_upright(orientation, tmp_path):
    upright = Image.new("RGB", (60, 30), "white")
    upright.paste((255, 0, 0), (0, 0, 10, 10))  # a red mark in the top-left corner
    upright.paste((0, 0, 255), (50, 20, 60, 30))  # a blue one in the bottom-right
    stored = upright if STORED_AS[orientation] is None else upright.transpose(STORED_AS[orientation])
    exif = Image.Exif()
    exif[0x0112] = orientation
    path = tmp_path / f"o{orientation}.png"
    stored.save(path, exif=exif.tobytes())
    page = load_page(path)
    assert page.image.size == (60, 30)
    assert np.array_equal(np.asarray(page.image), np.asarray(upright))
    assert page.exif_orientation == orientation


def test_image_without_exif_has_no_orientation(tmp_path):
    path = tmp_path / "plain.png"
    Image.new("RGB", (20, 10), "white").save(path)
    page = load_page(path)
    assert page.exif_orientation is None and page.info()["exif_orientation"] is None


def test_text_blocks_group_paragraph_lines(two_column_page):
    """Text-layer lines group into paragraph blocks within one column; lines segmented from the
    pixels group into (about) as many."""
    from models.nano.preprocess import to_gray
    from mudiff_viz.inputs.regions import group_blocks

    page = two_column_page.render(150)
    boxes = [ln.bbox for ln in page.lines]
    blocks = group_blocks(boxes, max_lines=8)
    assert [i for b in blocks for i in b] == list(range(len(boxes)))  # every line once, in order
    assert max(len(b) for b in blocks) <= 8 and sum(len(b) > 2 for b in blocks) >= 3
    seg = segment_lines(to_gray(page.image))
    assert abs(len(group_blocks(seg, 8)) - len(blocks)) <= 2  # segmentation may split a line or two
    for block in blocks:  # a block stays in one column
        xs = [boxes[i][0] for i in block]
        assert max(xs) - min(xs) < 0.1 * page.width
