"""Glyph anchoring: after each commit, put the reading position back on the glyphs.

Both nano pairs give an answer token its rotary position by counting the characters committed
before it (models/nano/model.py, models/nano_char/model.py), while a visual token sits at the index
of the character the CTC head reads there. Read one character short (``nan`` as ``an``) and every
later token sits a column off the glyphs it should read: the model reads the glyph it just read
again, or skips one, and can loop on it for the rest of the line (docs/nano-models.md, "Glyph
anchoring").

The CTC head has already read each line. So after every commit the column moves to the end of the
CTC reading's prefix that is closest (edit distance) to the committed text of the line, searched
within ``reach`` columns of the counted column, ties going to the counted one, then to the further
one (``an`` is as close to ``n`` as to ``nan``; moving on reads on, moving back reads a glyph
twice, which is how a loop starts). While the committed
text matches the CTC reading nothing moves; a misread the CTC head does not share is corrected at
the next token. Every decoder runs through the same commits, so the exactness contracts (a
speculative decode equals its reference decode) hold with anchoring on or off.
"""

from __future__ import annotations


ANCHOR_REACH = 3  # columns either side of the counted one (chosen on the validation pages: docs/nano-models.md)


def anchored_column(line_text: str, ctc_line: str, column: int, reach: int = ANCHOR_REACH) -> int:
    """The column after ``line_text`` (the committed text of the current line) on the CTC head's
    reading ``ctc_line`` of that line, within ``reach`` of ``column`` (the counted one). ``reach``
    0, or a counted column beyond the CTC reading's reach, leaves ``column`` as it is."""
    lo, hi = max(0, column - reach), min(len(ctc_line), column + reach)
    if reach <= 0 or lo > hi or ctc_line[:column] == line_text:  # the last: distance 0 at the counted column
        return column
    from rapidfuzz.distance import Levenshtein  # here, not at the top: the GPU kit's device path imports this module without it

    return min(range(lo, hi + 1), key=lambda j: (Levenshtein.distance(line_text, ctc_line[:j]), abs(j - column), -j))


def anchored_walk(line: int, col: float, text: str, ids: list[int], known: list[bool], pieces: list[str],
                  lengths: list[float], newlines: list[int], tails: list[float], ctc_lines: list[str],
                  reach: int = ANCHOR_REACH, every: int = 1) -> tuple[list[int], list[float], list[float]]:
    """Walk a row of known tokens from (``line``, ``col``) after committed ``text`` as one-token
    commits walk it: each token moves the position by its text (a newline to the column after it on
    the next line), then the column is anchored (:func:`anchored_column`) on that line's CTC reading.
    Tokens not ``known`` (padding) move nothing. ``every`` > 1 anchors only after every ``every``-th
    token, as a block decoder that commits blocks of that many tokens does. Returns, per token, the line and the counted column
    after it (where the token itself sits) and the anchored column after it (where the next starts).
    The decoders (models/nano/backend.py) and the training positions (nano_training/objectives.py)
    both walk through here, so the twin trains on the positions it meets."""
    k = text.count("\n")
    line_text = text.rpartition("\n")[2]
    lines, counted, anchored = [], [], []
    for j, (t, ok) in enumerate(zip(ids, known)):
        if ok:
            if newlines[t]:
                line, col = line + newlines[t], tails[t]
            else:
                col = col + lengths[t]
            piece = pieces[t]
            if "\n" in piece:
                k += piece.count("\n")
                line_text = piece.rpartition("\n")[2]
            else:
                line_text += piece
            lines.append(line)
            counted.append(col)
            if reach > 0 and k < len(ctc_lines) and (j + 1) % every == 0:
                col = float(anchored_column(line_text, ctc_lines[k], int(col), reach))
        else:
            lines.append(line)
            counted.append(col)
        anchored.append(col)
    return lines, counted, anchored
