"""Decoded tokens <-> ground-truth characters, to give each token a box on the page.

The decoded text and the ground-truth text are aligned with rapidfuzz's Levenshtein opcodes; a
token's box is the union of the boxes of the ground-truth characters its characters map to
(equal or substituted). Inserted characters map to nothing; a token with no mapped character gets
no box.

Every alignment goes through :func:`opcodes`, which refuses pairs longer than the
``max_align_chars`` limit: rapidfuzz's edit script of a short text against a 48 MB ground truth
takes gigabytes (one edit per character), and an uploaded trace may carry one. Callers degrade
(no colours, no boxes) and say so with :func:`alignment_note`.
"""

from __future__ import annotations

from rapidfuzz.distance import Levenshtein
from rapidfuzz.distance import Opcodes

from mudiff_viz.core.limits import current

Box = tuple[float, float, float, float]


def alignable(hyp: str, ref: str) -> bool:
    """Whether the pair is short enough to align (memory and time grow with its length)."""
    return len(hyp) + len(ref) <= current().max_align_chars


def opcodes(hyp: str, ref: str) -> Opcodes | None:
    """rapidfuzz's Levenshtein opcodes of ``hyp`` against ``ref``, or None when the pair is too long."""
    return Levenshtein.opcodes(hyp, ref) if alignable(hyp, ref) else None


def alignment_note(region_index: int, hyp: str, ref: str) -> str:
    """The sentence a view shows when a region's text and ground truth were too long to align."""
    return (f"ground truth too long to align: colours off (region {region_index + 1}: {len(hyp):,} characters decoded, "
            f"{len(ref):,} expected; limit {current().max_align_chars:,} together)")


def char_map(hyp: str, ref: str) -> list[int | None]:
    """For each character of ``hyp``, the index of the aligned character of ``ref`` (None: none, or
    the pair is too long to align)."""
    out: list[int | None] = [None] * len(hyp)
    for op in opcodes(hyp, ref) or []:
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
    return _fill_insertions(tokens, boxes)


def _fill_insertions(tokens: list[str], boxes: list[Box | None]) -> list[Box | None]:
    """A token the ground truth lacks (an inserted character) sits between its neighbours: give it
    the gap between the nearest boxed tokens on either side (a thin box at the edge if only one)."""
    out = list(boxes)
    known = [i for i, b in enumerate(boxes) if b is not None]
    if not known:
        return out
    for i, (tok, box) in enumerate(zip(tokens, boxes)):
        if box is not None or not tok:
            continue
        left = max((k for k in known if k < i), default=None)
        right = min((k for k in known if k > i), default=None)
        lb, rb = (boxes[left] if left is not None else None), (boxes[right] if right is not None else None)
        ref = lb or rb
        width = max(2.0, 0.3 * (ref[3] - ref[1]))
        x0 = lb[2] if lb else rb[0] - width
        x1 = rb[0] if rb and lb and rb[0] > lb[2] and abs(rb[1] - lb[1]) < (lb[3] - lb[1]) else x0 + width
        out[i] = (x0, ref[1], max(x1, x0 + 1.0), ref[3])
    return out


def diff_ops(hyp: str, ref: str) -> list[tuple[str, str, str]]:
    """(tag, hyp_piece, ref_piece) runs, for showing errors against ground truth; a pair too long to
    align is one replacement."""
    ops = opcodes(hyp, ref)
    if ops is None:
        return [("replace", hyp, ref)]
    return [(op.tag, hyp[op.src_start : op.src_end], ref[op.dest_start : op.dest_end]) for op in ops]
