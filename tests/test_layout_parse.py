"""The layout parse and the page document under both layout rule sets (docs/real-models.md#the-layout-parse).

``mineru-vl-utils`` (the default) follows MinerU2.5's client, mineru-vl-utils 2.0.7: one test per
case below, each written from its documented behaviour (its parse, its extraction step, its
post-processing and its markdown). ``release`` follows the MinerU-Diffusion release's end-to-end
script. Then OTSL to HTML and equation wrapping."""

from __future__ import annotations

import pytest

from models.mineru_common.content import DocBlock, block_content, otsl_to_html, page_document, wrap_equation
from models.mineru_common.layout import parse_layout
from mudiff_viz.core.errors import UserInputError

TEXT, TABLE, FORMULA = "text", "table", "formula"
TASK = {"\nText Recognition:": TEXT, "\nTable Recognition:": TABLE, "\nFormula Recognition:": FORMULA, None: None}


def el(box: str, kind: str, tail: str = "<|rotate_up|>") -> str:
    return f"<|box_start|>{box}<|box_end|><|ref_start|>{kind}<|ref_end|>{tail}"


def lines(*elements: str) -> str:
    return "\n".join(elements)


def answer_for(kind: str, n: int) -> str:
    """What the recognition of the n-th read block answers in these cases."""
    return {"table": "<fcel>t1<fcel>t2<nl>", "equation": f"x_{n} = {n}"}.get(kind, f"{kind} {n}")


def parse_and_read(text: str, rules: str = "mineru-vl-utils", answers=answer_for):
    """(kind, box, angle, continues, task) per block, and the page document once each read block is
    answered by ``answers(kind, n)``."""
    regions = parse_layout(text, 1000, 1000, rules)
    read = [r for r in regions if r.prompt is not None]
    texts = {id(r): answers(r.kind, n) for n, r in enumerate(read)}
    blocks = [(r.kind, " ".join(str(round(v)) for v in r.bbox), r.meta["angle"], r.meta["continues"], TASK[r.prompt])
              for r in regions]
    doc = page_document([DocBlock(r.kind, texts.get(id(r), ""), r.meta["continues"], r.bbox) for r in regions], rules)
    return blocks, doc


def b(kind, box, angle=0, continues=False, task=TEXT):
    return (kind, box, angle, continues, task)


T1 = "<table><tr><td>t1</td><td>t2</td></tr></table>"

# name: (layout answer, blocks, page document) as mineru-vl-utils 2.0.7 gives them
CASES = {
    "one element": (el("100 100 500 200", "text"), [b("text", "100 100 500 200")], "text 0"),
    "several elements on one line": (
        el("10 20 30 40", "table", "<|rotate_right|>") + el("50 60 70 80", "equation"),
        [b("table", "10 20 30 40", 90, task=TABLE), b("equation", "50 60 70 80", task=FORMULA)], T1 + "\n\n\\[\nx_1 = 1\n\\]"),
    "spaces inside the box or type tokens": (
        lines("<|box_start|> 100 100 500 500<|box_end|><|ref_start|>text<|ref_end|>",
              "<|box_start|>100 100 500 500<|box_end|><|ref_start|> text <|ref_end|>"), [], ""),
    "reversed corners swapped": (el("500 600 100 200", "text"), [b("text", "100 200 500 600")], "text 0"),
    "coordinate above 1000 skipped": (lines(el("100 100 1001 200", "text"), el("100 300 500 400", "title")),
                                      [b("title", "100 300 500 400")], "title 0"),
    "empty box skipped": (lines(el("100 100 100 200", "text"), el("100 300 500 400", "title")),
                          [b("title", "100 300 500 400")], "title 0"),
    "unknown becomes an image, never read": (el("100 100 500 500", "unknown"), [b("image", "100 100 500 500", task=None)], ""),
    "inline_formula dropped": (lines(el("100 100 500 200", "inline_formula"), el("100 300 500 400", "text")),
                               [b("text", "100 300 500 400")], "text 0"),
    "invented type dropped": (lines(el("100 100 500 200", "sidebar_widget"), el("100 300 500 400", "text")),
                              [b("text", "100 300 500 400")], "text 0"),
    "type lower-cased": (el("100 100 500 200", "Title"), [b("title", "100 100 500 200")], "title 0"),
    "newer block types kept and read as text": (
        lines(*(el(f"100 {100 + 60 * i} 500 {140 + 60 * i}", k) for i, k in enumerate(
            ["doc_title", "paragraph_title", "list_item", "caption", "footnote", "formula_number", "index"]))),
        [b(k, f"100 {100 + 60 * i} 500 {140 + 60 * i}") for i, k in enumerate(
            ["doc_title", "paragraph_title", "list_item", "caption", "footnote", "formula_number", "index"])],
        "doc_title 0\n\nparagraph_title 1\n\nlist_item 2\n\ncaption 3\n\nfootnote 4\n\nformula_number 5\n\nindex 6"),
    "rotation tag right after the type": (el("100 100 500 200", "text", "<|rotate_left|>"),
                                          [b("text", "100 100 500 200", 270)], "text 0"),
    "rotation tag later in the tail ignored": (el("100 100 500 200", "text", " <|rotate_right|>"),
                                               [b("text", "100 100 500 200", None)], "text 0"),
    "no rotation tag: no angle": (el("100 100 500 200", "text", ""), [b("text", "100 100 500 200", None)], "text 0"),
    "txt_contd_tgt continues a text block": (
        lines(el("100 100 900 300", "text"), el("100 800 900 950", "text", "<|rotate_up|><|txt_contd_tgt|>")),
        [b("text", "100 100 900 300"), b("text", "100 800 900 950", continues=True)], "text 0 text 1"),
    "txt_contd_tgt ignored on a title": (
        lines(el("100 100 900 300", "text"), el("100 800 900 950", "title", "<|rotate_up|><|txt_contd_tgt|>")),
        [b("text", "100 100 900 300"), b("title", "100 800 900 950")], "text 0\n\ntitle 1"),
    "a continued block joins the last text block": (
        lines(el("100 100 900 300", "text"), el("100 400 900 450", "title"),
              el("100 800 900 950", "text", "<|rotate_up|>txt_contd_tgt")),
        [b("text", "100 100 900 300"), b("title", "100 400 900 450"), b("text", "100 800 900 950", continues=True)],
        "text 0 text 2\n\ntitle 1"),
    "a continuation with nothing before stands alone": (
        el("100 800 900 950", "text", "<|rotate_up|><|txt_contd_tgt|>"),
        [b("text", "100 800 900 950", continues=True)], "text 0"),
    "same-type near-duplicate dropped, the first kept": (
        lines(el("100 100 500 300", "text"), el("101 101 501 301", "text"), el("100 100 500 250", "text")),
        [b("text", "100 100 500 300"), b("text", "100 100 500 250")], "text 0\n\ntext 1"),
    "IoU of exactly 0.9 is no duplicate": (lines(el("0 0 1000 1000", "text"), el("0 0 1000 900", "text")),
                                           [b("text", "0 0 1000 1000"), b("text", "0 0 1000 900")], "text 0\n\ntext 1"),
    "same box at another angle kept": (
        lines(el("100 100 500 300", "text"), el("100 100 500 300", "text", "<|rotate_right|>")),
        [b("text", "100 100 500 300"), b("text", "100 100 500 300", 90)], "text 0\n\ntext 1"),
    "same box of another type kept": (lines(el("100 100 500 300", "text"), el("101 101 501 301", "title")),
                                      [b("text", "100 100 500 300"), b("title", "101 101 501 301")], "text 0\n\ntitle 1"),
    "a list keeps its near-identical item": (
        lines(el("100 100 900 300", "list"), el("100 100 900 299", "text")),
        [b("list", "100 100 900 300", task=None), b("text", "100 100 900 299")], "text 0"),
    "a dropped duplicate suppresses nothing": (
        lines(*(el(f"{x} 0 {x + 800} 1000", "text") for x in (0, 30, 60))),
        [b("text", "0 0 800 1000"), b("text", "60 0 860 1000")], "text 0\n\ntext 1"),
    "an equation_block keeps its one equation": (
        lines(el("100 100 900 300", "equation_block"), el("100 100 900 299", "equation")),
        [b("equation_block", "100 100 900 300", task=None), b("equation", "100 100 900 299", task=FORMULA)],
        "\\[\nx_0 = 0\n\\]"),
    "an equation_block folds its equations into one": (
        lines(el("100 100 900 400", "equation_block"), el("110 110 890 200", "equation"), el("110 250 890 390", "equation")),
        [b("equation_block", "100 100 900 400", task=None), b("equation", "110 110 890 200", task=FORMULA),
         b("equation", "110 250 890 390", task=FORMULA)],
        "\\[\n\\begin{array}{l} x_0 = 0 \\\\ x_1 = 1 \\\\ \\end{array}\n\\]"),
    "text and equations inside a table dropped": (
        lines(el("100 100 900 600", "table"), el("150 150 400 200", "text"), el("150 250 400 300", "equation"),
              el("150 580 400 700", "text"), el("150 300 400 350", "title")),
        [b("table", "100 100 900 600", task=TABLE), b("text", "150 580 400 700"), b("title", "150 300 400 350")],
        T1 + "\n\ntext 1\n\ntitle 2"),
    "only an image_caption inside a picture is dropped": (
        lines(el("100 100 900 700", "image"), el("150 600 850 680", "image_caption"), el("150 720 850 780", "image_caption"),
              el("150 650 850 690", "table_caption")),
        [b("image", "100 100 900 700", task=None), b("image_caption", "150 720 850 780"), b("table_caption", "150 650 850 690")],
        "image_caption 0\n\ntable_caption 1"),
    "an image_caption inside an image_block is dropped": (
        lines(el("100 100 900 800", "image_block"), el("150 700 850 780", "image_caption")),
        [b("image_block", "100 100 900 800", task=None)], ""),
    "an image inside a table is absorbed": (lines(el("100 100 900 600", "table"), el("150 150 400 300", "image")),
                                            [b("table", "100 100 900 600", task=TABLE)], T1),
    "pictures, lists and containers are not read": (
        lines(el("100 100 400 300", "chart"), el("100 400 400 500", "list"), el("500 100 900 500", "image_block")),
        [b("chart", "100 100 400 300", task=None), b("list", "100 400 400 500", task=None),
         b("image_block", "500 100 900 500", task=None)], ""),
    "header, footer and page number stay in the document": (
        lines(el("100 10 900 40", "header"), el("100 100 900 300", "text"), el("100 950 900 990", "footer"),
              el("100 900 200 940", "page_number")),
        [b("header", "100 10 900 40"), b("text", "100 100 900 300"), b("footer", "100 950 900 990"),
         b("page_number", "100 900 200 940")], "header 0\n\ntext 1\n\nfooter 2\n\npage_number 3"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_layout_case_as_mineru_vl_utils(name):
    text, blocks, doc = CASES[name]
    assert parse_and_read(text) == (blocks, doc)


def test_a_continued_cjk_block_joins_without_a_space():
    text = lines(el("100 100 900 300", "text"), el("100 800 900 950", "text", "<|rotate_up|><|txt_contd_tgt|>"))
    _, doc = parse_and_read(text, answers=lambda kind, n: ["第一段", "续写内容"][n])
    assert doc == "第一段续写内容"


def test_non_text_answers_are_dropped():
    _, doc = parse_and_read(lines(el("100 10 900 40", "header"), el("100 100 900 300", "text")),
                            answers=lambda kind, n: "[Non-Text]")
    assert doc == ""


def test_a_table_answer_without_otsl_is_dropped():
    _, doc = parse_and_read(lines(el("100 100 900 300", "table"), el("100 400 900 600", "table")),
                            answers=lambda kind, n: ["plain words", "<fcel>a<fcel>b<nl><fcel>c<nl>"][n])
    assert doc == "<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td></td></tr></table>"


def test_more_than_one_tag_in_a_folded_equation_becomes_plain_numbers():
    text = lines(el("100 100 900 400", "equation_block"), el("110 110 890 200", "equation"), el("110 250 890 390", "equation"))
    _, doc = parse_and_read(text, answers=lambda kind, n: f"a_{n} \\tag{{{n + 1}}}")
    assert doc == "\\[\n\\begin{array}{l} a_0 (1) \\\\ a_1 (2) \\\\ \\end{array}\n\\]"


# ---- the release's end-to-end script --------------------------------------------------------------------


def test_release_rules_keep_every_type_and_every_duplicate():
    text = lines(el("100 100 900 300", "list"), el("100 100 900 299", "text"), el("100 100 900 299", "text"),
                 el("100 400 500 450", "inline_formula"), el("100 500 500 550", "Sidebar_Widget"),
                 el("150 650 850 690", "unknown"))
    blocks, _ = parse_and_read(text, "release")
    assert blocks == [b("list", "100 100 900 300"), b("text", "100 100 900 299"), b("text", "100 100 900 299"),
                      b("inline_formula", "100 400 500 450"), b("sidebar_widget", "100 500 500 550"),
                      b("unknown", "150 650 850 690")]


def test_release_rules_read_one_element_per_line_from_its_start():
    text = lines(el("10 20 30 40", "table", "<|rotate_right|>") + el("50 60 70 80", "equation"),
                 " " + el("100 100 500 200", "title"), "junk " + el("100 300 500 400", "text"))
    blocks, _ = parse_and_read(text, "release")
    # the second element is swallowed into the first's tail, and its <|rotate_up|> wins: tags are tried up first
    assert blocks == [b("table", "10 20 30 40", 0, task=TABLE), b("title", "100 100 500 200")]


def test_release_rules_take_the_rotation_tag_anywhere_and_ignore_continuations():
    text = lines(el("100 100 900 300", "text"), el("100 800 900 950", "text", " x <|rotate_down|><|txt_contd_tgt|>"))
    blocks, doc = parse_and_read(text, "release")
    assert blocks == [b("text", "100 100 900 300"), b("text", "100 800 900 950", 180)] and doc == "text 0\n\ntext 1"


def test_release_rules_leave_paratext_out_of_the_document_and_read_all_but_images():
    text = lines(el("100 10 900 40", "header"), el("100 100 900 300", "text"), el("100 320 900 400", "chart"),
                 el("100 420 900 500", "image"), el("100 520 900 600", "equation_block"), el("100 900 200 940", "page_number"),
                 el("100 950 900 990", "footer"), el("300 950 400 990", "unknown"), el("600 950 700 990", "table"))
    blocks, doc = parse_and_read(text, "release", answers=lambda kind, n: "no table" if kind == "table" else f"{kind} {n}")
    assert [t for *_, t in blocks] == [TEXT, TEXT, TEXT, None, None, TEXT, TEXT, TEXT, TABLE]
    assert doc == "text 1\n\nchart 2\n\nno table"  # a table answer without OTSL stays as it is


def test_unknown_layout_rules_are_refused_in_one_line():
    with pytest.raises(UserInputError, match="layout rules must be one of mineru-vl-utils, release"):
        parse_layout(el("100 100 500 200", "text"), 1000, 1000, "mineru")


# ---- OTSL and equations -------------------------------------------------------------------------------


def test_otsl_to_html_with_spans():
    otsl = "<fcel>Name<lcel><fcel>Age<nl><fcel>first<fcel>last<ucel><nl><fcel>Ada<fcel>Lovelace<ucel><nl>"
    assert otsl_to_html(otsl) == ('<table><tr><td colspan="2">Name</td><td rowspan="3">Age</td></tr>'
                                  "<tr><td>first</td><td>last</td></tr><tr><td>Ada</td><td>Lovelace</td></tr></table>")


def test_otsl_empty_cells_cross_spans_and_escaping():
    otsl = "<fcel>a & b<lcel><ecel><nl><ucel><xcel><fcel><c><nl>"
    assert otsl_to_html(otsl) == ('<table><tr><td rowspan="2" colspan="2">a &amp; b</td><td></td></tr>'
                                  "<tr><td>&lt;c&gt;</td></tr></table>")


def test_otsl_ragged_rows_are_padded_with_empty_cells():
    assert otsl_to_html("<fcel>a<fcel>b<fcel>c<nl><fcel>d<nl><fcel>e<fcel>f<nl>") == (
        "<table><tr><td>a</td><td>b</td><td>c</td></tr><tr><td>d</td><td></td><td></td></tr>"
        "<tr><td>e</td><td>f</td><td></td></tr></table>")


def test_otsl_text_before_the_first_tag_is_skipped():
    assert otsl_to_html("Table 1: results <fcel>a<fcel>b<nl>") == "<table><tr><td>a</td><td>b</td></tr></table>"


def test_otsl_passes_an_html_table_through_and_plain_text_by_the_rules():
    assert otsl_to_html("<table><tr><td>x</td></tr></table>") == "<table><tr><td>x</td></tr></table>"
    assert otsl_to_html("no table here") == "" and otsl_to_html("no table here", "release") == "no table here"


def test_equations_are_wrapped_once():
    assert wrap_equation("E = mc^2") == "\\[\nE = mc^2\n\\]"
    assert wrap_equation("\\[ x \\]") == "\\[ x \\]"
    assert block_content("equation", " a+b ") == "\\[\na+b\n\\]" and block_content("text", "a+b") == "a+b"
    assert block_content("equation", "  ") == ""
