"""Decoded text against the ground truth as readable HTML: whole words, in reading order.

Errors are shown where they happen, inside the running text: a substitution as the expected text
struck through followed by what the model wrote, an extra piece (the model wrote it, the page does
not have it) and a missing piece (on the page, not in the output) each in their own style. The
alignment is rapidfuzz's Levenshtein over words, so a line never breaks inside a word and a
substitution reads "expected -> written" in order. Model text is escaped.
"""

from __future__ import annotations

import html
import re

from rapidfuzz.distance import Levenshtein

STYLE = """
<style>
.mdiff { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 13px; line-height: 1.55;
  white-space: pre-wrap; word-break: normal; overflow-wrap: anywhere; }
.mdiff del { background: #f3c677; text-decoration: line-through; color: inherit; }
.mdiff ins { background: #b9dcf2; text-decoration: none; color: inherit; }
.mdiff .extra { background: #e9c6dd; }
.mdiff .missing { background: #e3e5e8; text-decoration: line-through; }
.mdiff-key { font-size: 12px; opacity: .85; margin-bottom: 4px; }
</style>
"""
KEY = ('<div class="mdiff-key">'
       '<del>expected</del><ins>written</ins> substituted · <ins class="extra">extra</ins> written, not on the page · '
       '<del class="missing">missing</del> on the page, not written</div>')


def _words(text: str) -> list[str]:
    """Words and the white space between them, in order (joining them gives the text back)."""
    return re.findall(r"\S+|\s+", text)


def word_runs(hyp: str, ref: str) -> list[tuple[str, str, str]]:
    """(tag, written, expected) runs in reading order, aligned word by word (rapidfuzz Levenshtein
    over word sequences), so a run never splits a word and substitutions read in place."""
    a, b = _words(hyp), _words(ref)
    out: list[tuple[str, str, str]] = []
    for op in Levenshtein.opcodes(a, b):
        got, want = "".join(a[op.src_start:op.src_end]), "".join(b[op.dest_start:op.dest_end])
        tag = "equal" if op.tag == "equal" else ("replace" if got and want else ("insert" if got else "delete"))
        if out and tag != "equal" and out[-1][0] != "equal":  # one run per stretch of differences
            _, g, w = out.pop()
            got, want = g + got, w + want
            tag = "replace" if got and want else ("insert" if got else "delete")
        out.append((tag, got, want))
    return out


def diff_html(hyp: str, ref: str | None) -> str:
    """The decoded text with its differences from ``ref`` marked (plain escaped text without a ref)."""
    if ref is None:
        return f'{STYLE}<div class="mdiff">{html.escape(hyp)}</div>'
    parts = []
    for tag, got, want in word_runs(hyp, ref):
        if tag == "equal":
            parts.append(html.escape(got))
        elif tag == "replace":
            parts.append(f"<del>{html.escape(want)}</del><ins>{html.escape(got)}</ins>")
        elif tag == "insert":
            parts.append(f'<ins class="extra">{html.escape(got)}</ins>')
        else:
            parts.append(f'<del class="missing">{html.escape(want)}</del>')
    return f'{STYLE}{KEY}<div class="mdiff">{"".join(parts)}</div>'
