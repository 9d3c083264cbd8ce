"""Decoded tokens <-> ground-truth characters, to give each token a box on the page.

The decoded text and the ground-truth text are aligned with rapidfuzz's Levenshtein opcodes; a
token's box is the union of the boxes of the ground-truth characters its characters map to
(equal or substituted). Inserted characters map to nothing; a token with no mapped character gets
no box.
"""

from __future__ import annotations

from rapidfuzz.distance import Levenshtein

Box = tuple[float, float, float, float]


def char_map(hyp: str, ref: str) -> list[int | None]:
    """For each character of ``hyp``, the index of the aligned character of ``ref`` (or None)."""
    out: list[int | None] = [None] * len(hyp)
    for op in Levenshtein.opcodes(hyp, ref):
        if op.tag in ("equal", "replace"):
            n = min(op.src_end - op.src_start, op.dest_end - op.dest_start)
            for k in range(n):
                out[op.src_start + k] = op.dest_start + k
    return out


def token_boxes(tokens: list[str], gt_chars: list[tuple[str, Box]]) -> list[Box | None]:
    """Page box per token, from ground-truth characters with boxes."""
    hyp = "".join(tokens)
    ref = "".join(c for c, _ in gt_chars)
    mapping = char_map(hyp, ref)
    boxes: list[Box | None] = []
    pos = 0
    for tok in tokens:
        idx = [mapping[k] for k in range(pos, pos + len(tok)) if mapping[k] is not None]
        pos += len(tok)
        # spaces have degenerate boxes in some PDFs: use them only when nothing else maps
        inked = [i for i in idx if not ref[i].isspace()] or idx
        if not inked:
            boxes.append(None)
            continue
        bs = [gt_chars[i][1] for i in inked]
        boxes.append((min(b[0] for b in bs), min(b[1] for b in bs), max(b[2] for b in bs), max(b[3] for b in bs)))
    return boxes


def diff_ops(hyp: str, ref: str) -> list[tuple[str, str, str]]:
    """(tag, hyp_piece, ref_piece) runs, for showing errors against ground truth."""
    return [
        (op.tag, hyp[op.src_start : op.src_end], ref[op.dest_start : op.dest_end])
        for op in Levenshtein.opcodes(hyp, ref)
    ]
