"""A recognised block's text as the page output shows it, and the blocks of a page joined into one
document, under the layout rules of layout.py (docs/real-models.md#the-page-document).

Both rule sets turn tables from OTSL into HTML and wrap display equations in ``\\[ ... \\]``.
mineru-vl-utils 2.0.7 also folds the equations of an ``equation_block`` into one, reads a
``list_item`` as text, drops a ``[Non-Text]`` answer, and joins a continued text block to the last
text block. The release's script drops the page's paratext (header, footer, page number, aside
text, page footnote, unknown) unless asked to keep it.

OTSL (the table prompt's answer) is a grid written row by row: ``<fcel>`` a cell with the text that
follows, ``<ecel>`` an empty cell, ``<lcel>`` the cell to the left spans here, ``<ucel>`` the cell
above spans here, ``<xcel>`` both, ``<nl>`` the end of a row.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from models.mineru_common.layout import DEFAULT_LAYOUT_RULES, check_rules, covered

OTSL_TAGS = ("fcel", "ecel", "lcel", "ucel", "xcel", "nl")
_TAG_RE = re.compile(r"<(fcel|ecel|lcel|ucel|xcel|nl)>")
NON_TEXT = "[Non-Text]"  # the model's answer for a block without text
NON_TEXT_KEPT = frozenset({"image", "chart", "table", "equation", "list", "image_block", "equation_block"})
PARATEXT = frozenset({"header", "footer", "page_number", "aside_text", "page_footnote", "unknown"})
_CJK_RE = re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf]")


@dataclass
class DocBlock:
    """One block of the page document: its type, decoded text, continuation mark and page box."""

    kind: str
    text: str
    continues: bool = False
    bbox: tuple[float, float, float, float] | None = None


def otsl_rows(otsl: str) -> list[list[tuple[str, str]]]:
    """The grid: per row, (tag, text) per cell. Text before the first tag is skipped; a row shorter
    than the longest is padded with empty cells (both converters do so)."""
    rows: list[list[tuple[str, str]]] = [[]]
    parts = _TAG_RE.split(otsl)
    for i in range(1, len(parts), 2):
        tag, text = parts[i], parts[i + 1] if i + 1 < len(parts) else ""
        if tag == "nl":
            rows.append([])
            continue
        rows[-1].append((tag, text.strip() if tag == "fcel" else ""))
    rows = [r for r in rows if r]
    width = max((len(r) for r in rows), default=0)
    return [r + [("ecel", "")] * (width - len(r)) for r in rows]


def otsl_to_html(otsl: str, rules: str = DEFAULT_LAYOUT_RULES) -> str:
    """An HTML table with rowspan/colspan from OTSL. An answer that is already an HTML table comes
    back as is; one without OTSL tags gives nothing (mineru-vl-utils) or itself (the release)."""
    if otsl.startswith("<table") and otsl.endswith("</table>"):
        return otsl
    if not _TAG_RE.search(otsl):
        return "" if rules == "mineru-vl-utils" else otsl.strip()
    rows = otsl_rows(otsl)
    tag_at = lambda r, c: rows[r][c][0] if r < len(rows) and c < len(rows[r]) else None  # noqa: E731
    out = ["<table>"]
    for r, row in enumerate(rows):
        cells = []
        for c, (tag, text) in enumerate(row):
            if tag not in ("fcel", "ecel"):
                continue  # covered by a span
            colspan = 1
            while tag_at(r, c + colspan) in ("lcel", "xcel"):
                colspan += 1
            rowspan = 1
            while tag_at(r + rowspan, c) in ("ucel", "xcel"):
                rowspan += 1
            attrs = (f' rowspan="{rowspan}"' if rowspan > 1 else "") + (f' colspan="{colspan}"' if colspan > 1 else "")
            cells.append(f"<td{attrs}>{html.escape(text)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "".join(out)


def wrap_equation(latex: str) -> str:
    """A display equation in ``\\[`` ... ``\\]`` (each added only where missing)."""
    latex = latex.strip()
    if not latex.startswith("\\["):
        latex = "\\[\n" + latex
    if not latex.endswith("\\]"):
        latex = latex + "\n\\]"
    return latex


def block_content(kind: str, text: str, rules: str = DEFAULT_LAYOUT_RULES) -> str:
    """One block's output: tables as HTML, equations wrapped, everything else as decoded."""
    if kind == "table":
        return otsl_to_html(text.strip(), rules)
    if kind in ("equation", "formula"):
        return wrap_equation(text) if text.strip() else ""
    return text


def combine_equations(latex: list[str]) -> str:
    """The equations of one equation_block as one array, one row each; with more than one ``\\tag``
    in all, each tag becomes a plain ``(...)`` (an array takes one tag)."""
    if sum(len(re.findall(r"\\tag\s*\{[^}]*\}", t)) for t in latex) > 1:
        latex = [re.sub(r"\\tag\s*\{([^}]*)\}", r"(\1)", t) for t in latex]
    return "\\begin{array}{l} " + "".join(t + " \\\\ " for t in latex) + "\\end{array}"


def fold_equation_blocks(blocks: list[DocBlock]) -> list[DocBlock]:
    """An equation_block over more than one equation (each covered above 90 %) becomes one equation
    in its place, and those equations go; every equation_block is dropped (mineru-vl-utils)."""
    equations = [i for i, b in enumerate(blocks) if b.kind == "equation" and b.bbox]
    groups = {}
    for i, b in enumerate(blocks):
        if b.kind == "equation_block" and b.bbox:
            inner = [j for j in equations if covered(blocks[j].bbox, b.bbox) > 0.9]
            if len(inner) > 1:
                groups[i] = inner
    folded = {j for inner in groups.values() for j in inner}
    out = []
    for i, b in enumerate(blocks):
        if i in groups:
            out.append(DocBlock("equation", combine_equations([blocks[j].text for j in groups[i]]), bbox=b.bbox))
        elif i not in folded and b.kind != "equation_block":
            out.append(b)
    return out


def client_document(blocks: list[DocBlock]) -> str:
    """mineru-vl-utils 2.0.7's page: list items as text, ``[Non-Text]`` dropped, equation blocks
    folded, a continued text block joined to the last text block (with a space, none in CJK)."""
    blocks = [DocBlock("text" if b.kind == "list_item" else b.kind, b.text, b.continues, b.bbox) for b in blocks]
    blocks = [b for b in blocks if b.text.strip() != NON_TEXT or b.kind in NON_TEXT_KEPT]
    out: list[str] = []
    last_text = -1
    for b in fold_equation_blocks(blocks):
        content = block_content(b.kind, b.text, "mineru-vl-utils")
        if not content:
            continue
        if b.continues and b.kind == "text" and last_text >= 0:
            out[last_text] += content if _CJK_RE.search(content) else " " + content
            continue
        out.append(content)
        if b.kind == "text":
            last_text = len(out) - 1
    return "\n\n".join(out)


def release_document(blocks: list[DocBlock], keep_paratext: bool = False) -> str:
    """The release script's page: each block's content stripped, empty ones and (unless kept) the
    paratext dropped, blocks apart by a blank line."""
    out = [block_content(b.kind, b.text.strip(), "release") for b in blocks
           if keep_paratext or b.kind not in PARATEXT]
    return "\n\n".join(c for c in out if c)


def page_document(blocks: list[DocBlock], rules: str = DEFAULT_LAYOUT_RULES) -> str:
    """The page's text from its blocks in reading order, under ``rules``."""
    return client_document(blocks) if check_rules(rules) == "mineru-vl-utils" else release_document(blocks)


def trace_document(trace) -> str:
    """The page document of a two-stage trace (region 0 is the layout pass; the trace's params name
    the layout rules and the regions that continue the previous block, ``layout_continues``)."""
    continues = set(trace.params.get("layout_continues") or ())
    rules = trace.params.get("layout_rules") or DEFAULT_LAYOUT_RULES
    return page_document([DocBlock(r.kind, r.text, i in continues, tuple(r.bbox))
                          for i, r in enumerate(trace.regions) if i > 0], rules)
