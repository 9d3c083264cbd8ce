"""A recognised block's text as the page output shows it, as MinerU2.5's client turns it out:
tables from OTSL to HTML, display equations wrapped in ``\\[ ... \\]``, and the blocks of a page
joined into one document (a block marked ``continues`` joins the previous one without a paragraph
break). docs/real-models.md#the-layout-parse.

OTSL (the table prompt's answer) is a grid written row by row: ``<fcel>`` a cell with the text that
follows, ``<ecel>`` an empty cell, ``<lcel>`` the cell to the left spans here, ``<ucel>`` the cell
above spans here, ``<xcel>`` both, ``<nl>`` the end of a row.
"""

from __future__ import annotations

import html
import re

OTSL_TAGS = ("fcel", "ecel", "lcel", "ucel", "xcel", "nl")
_TAG_RE = re.compile(r"<(fcel|ecel|lcel|ucel|xcel|nl)>")


def otsl_rows(otsl: str) -> list[list[tuple[str, str]]]:
    """The grid: per row, (tag, text) per cell. Text before the first tag is ignored."""
    rows: list[list[tuple[str, str]]] = [[]]
    parts = _TAG_RE.split(otsl)
    for i in range(1, len(parts), 2):
        tag, text = parts[i], parts[i + 1] if i + 1 < len(parts) else ""
        if tag == "nl":
            rows.append([])
            continue
        rows[-1].append((tag, text.strip()))
    return [r for r in rows if r]


def otsl_to_html(otsl: str) -> str:
    """An HTML table with rowspan/colspan from OTSL; a text without OTSL tags comes back as is."""
    if not _TAG_RE.search(otsl):
        return otsl
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
            cells.append(f"<td{attrs}>{html.escape(text) if tag == 'fcel' else ''}</td>")
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


def block_content(kind: str, text: str) -> str:
    """One block's output: tables as HTML, equations wrapped, everything else as decoded."""
    if kind == "table":
        return otsl_to_html(text)
    if kind in ("equation", "formula"):
        return wrap_equation(text) if text.strip() else text
    return text


def page_document(blocks: list[tuple[str, str, bool]]) -> str:
    """The page's text from (kind, text, continues) per recognised block, in reading order: blocks
    apart by a blank line, a continuing block joined to the previous by a space."""
    out: list[str] = []
    for kind, text, continues in blocks:
        content = block_content(kind, text).strip()
        if not content:
            continue
        if continues and out:
            out[-1] = out[-1] + " " + content
        else:
            out.append(content)
    return "\n\n".join(out)


def trace_document(trace) -> str:
    """The page document of a two-stage trace (region 0 is the layout pass; the trace's
    ``params.layout_continues`` names the regions that continue the previous block)."""
    continues = set(trace.params.get("layout_continues") or ())
    return page_document([(r.kind, r.text, i in continues) for i, r in enumerate(trace.regions) if i > 0])
