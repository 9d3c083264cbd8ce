"""The layout parse and page output as MinerU2.5's client (mineru-vl-utils) documents them: one test
per rule (docs/real-models.md#the-layout-parse), OTSL to HTML, equation wrapping, the page document."""

from __future__ import annotations

import pytest

from models.mineru_common.content import block_content, otsl_to_html, page_document, wrap_equation
from models.mineru_common.layout import parse_layout


def el(box: str, kind: str, tail: str = "<|rotate_up|>") -> str:
    return f"<|box_start|>{box}<|box_end|><|ref_start|>{kind}<|ref_end|>{tail}"


def kinds(text: str) -> list[str]:
    return [r.kind for r in parse_layout(text, 1000, 1000)]


def test_unknown_becomes_an_image_and_is_not_recognised():
    (r,) = parse_layout(el("100 100 500 500", "unknown"), 1000, 1000)
    assert r.kind == "image" and r.prompt is None and r.meta["skip"] and r.meta["model_kind"] == "unknown"


@pytest.mark.parametrize("kind", ["inline_formula", "sidebar_widget", "Inline_Formula"])
def test_inline_formula_and_unknown_types_are_dropped(kind):
    assert kinds(el("100 100 500 200", kind) + "\n" + el("100 300 500 400", "text")) == ["text"]


def test_near_duplicate_boxes_keep_the_first():
    text = "\n".join([el("100 100 500 300", "text"), el("101 101 501 301", "title"),  # IoU ~0.99: dropped
                      el("100 100 500 250", "text")])  # IoU 0.75: kept
    regions = parse_layout(text, 1000, 1000)
    assert [(r.kind, r.bbox) for r in regions] == [("text", (100.0, 100.0, 500.0, 300.0)), ("text", (100.0, 100.0, 500.0, 250.0))]


def test_text_inside_a_table_is_removed():
    text = "\n".join([el("100 100 900 600", "table"), el("150 150 400 200", "text"),  # inside: removed
                      el("150 580 400 700", "text"),  # mostly outside: kept
                      el("150 300 400 350", "title")])  # not text: kept
    assert kinds(text) == ["table", "text", "title"]


def test_txt_contd_tgt_continues_the_previous_block():
    text = "\n".join([el("100 100 900 300", "text"), el("100 800 900 950", "text", "<|rotate_up|><|txt_contd_tgt|>")])
    first, second = parse_layout(text, 1000, 1000)
    assert not first.meta["continues"] and second.meta["continues"]
    (alone,) = parse_layout(el("100 800 900 950", "text", "<|txt_contd_tgt|>"), 1000, 1000)
    assert not alone.meta["continues"]  # nothing before it to continue


def test_a_caption_inside_an_image_is_dropped():
    text = "\n".join([el("100 100 900 700", "image"), el("150 600 850 680", "image_caption"),  # inside: dropped
                      el("150 720 850 780", "image_caption")])  # below the picture: kept
    assert kinds(text) == ["image", "image_caption"]


@pytest.mark.parametrize("element", [
    "<|box_start|> 100 100 500 500<|box_end|><|ref_start|>text<|ref_end|>",
    "<|box_start|>100 100 500 500 <|box_end|><|ref_start|>text<|ref_end|>",
    "<|box_start|>100 100 500 500<|box_end|><|ref_start|> text <|ref_end|>",
])
def test_spaces_inside_box_coordinates_are_rejected(element):
    assert kinds(element) == []
    assert kinds("<|box_start|>100 100 500 500<|box_end|><|ref_start|>text<|ref_end|>") == ["text"]


def test_elements_keep_their_angle_and_reading_order_on_one_line():
    text = el("10 20 30 40", "table", "<|rotate_right|>") + el("50 60 70 80", "equation")
    a, b = parse_layout(text, 2000, 1000)
    assert (a.kind, a.meta["angle"], b.kind, b.meta["angle"]) == ("table", 90, "equation", 0)
    assert a.bbox == (20.0, 20.0, 60.0, 40.0) and b.prompt == "\nFormula Recognition:"


def test_otsl_to_html_with_spans():
    otsl = "<fcel>Name<lcel><fcel>Age<nl><fcel>first<fcel>last<ucel><nl><fcel>Ada<fcel>Lovelace<ucel><nl>"
    assert otsl_to_html(otsl) == ('<table><tr><td colspan="2">Name</td><td rowspan="3">Age</td></tr>'
                                  "<tr><td>first</td><td>last</td></tr><tr><td>Ada</td><td>Lovelace</td></tr></table>")


def test_otsl_empty_cells_cross_spans_and_escaping():
    otsl = "<fcel>a & b<lcel><ecel><nl><ucel><xcel><fcel><c><nl>"
    assert otsl_to_html(otsl) == ('<table><tr><td rowspan="2" colspan="2">a &amp; b</td><td></td></tr>'
                                  "<tr><td>&lt;c&gt;</td></tr></table>")
    assert otsl_to_html("no table here") == "no table here"


def test_equations_are_wrapped_once():
    assert wrap_equation("E = mc^2") == "\\[\nE = mc^2\n\\]"
    assert wrap_equation("\\[ x \\]") == "\\[ x \\]"
    assert block_content("equation", " a+b ") == "\\[\na+b\n\\]" and block_content("text", "a+b") == "a+b"


def test_the_page_document_joins_continued_blocks():
    doc = page_document([("title", "Results", False), ("text", "The first half", False),
                         ("text", "and the rest.", True), ("table", "<fcel>1<fcel>2<nl>", False),
                         ("equation", "x=1", False), ("image", "", False)])
    assert doc == ("Results\n\nThe first half and the rest.\n\n<table><tr><td>1</td><td>2</td></tr></table>"
                   "\n\n\\[\nx=1\n\\]")
