"""One decoded (or failed) page -> its rows in the store's tables (corpus/schema.py).

The per-token order columns come from core/order.py (``token_orders``), the draft-and-verify columns
from core/speculation.py, correctness from the
player's ``token_correctness`` and the page scores from the probe benchmark's ``score_row``, so a
corpus row says what the player and the benchmark say about the same page.
"""

from __future__ import annotations

import unicodedata
from statistics import mean

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.order import token_orders
from mudiff_viz.core.speculation import step_drafts, token_verdicts
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.build import SPECULATION
from mudiff_viz.probes.bench import score_row
from mudiff_viz.views.player import token_correctness

CHAR_CLASSES = ("letter", "digit", "punctuation", "space", "newline", "other", "mixed")
PAGE_SCORES = ("cer", "gt_chars", "mean_confidence", "error_tokens", "confident_error_tokens", "occluded_words",
               "recovered_words", "recovery_rate", "cer_rest", "first_step_share")


def char_class(text: str) -> str:
    """The class of a token's characters; "mixed" when they differ (a subword like "a," or "1st")."""
    classes = {_class_of(ch) for ch in text}
    if not classes:
        return "other"
    return classes.pop() if len(classes) == 1 else "mixed"


def _class_of(ch: str) -> str:
    if ch == "\n":
        return "newline"
    if ch.isspace():
        return "space"
    if ch.isalpha():
        return "letter"
    if ch.isdigit():
        return "digit"
    return "punctuation" if unicodedata.category(ch).startswith(("P", "S")) else "other"


def one_line_error(exc: BaseException) -> str:
    """A failure as one line: a bad input's own message, anything else prefixed with its type."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    line = text if isinstance(exc, UserInputError) else f"{type(exc).__name__}: {text}".rstrip(": ")
    return line[:300]


def failed_rows(base: dict, error: str) -> dict[str, list[dict]]:
    """A page that could not be decoded: one pages row with its error, nothing else."""
    return {"pages": [{**base, "status": "failed", "error": error}]}


def page_rows(base: dict, trace: Trace, gt_text: str | None) -> dict[str, list[dict]]:
    """Every table's rows for one decoded page. ``base`` holds the key and the variant columns."""
    key = {k: base[k] for k in ("run_id", "page_id", "decoder")}
    scores = score_row(trace, gt_text) if gt_text is not None else {}
    m = trace.metrics
    page = {
        **base, "status": "ok", "error": None,
        **{k: scores.get(k) for k in PAGE_SCORES},
        "tokens": m.tokens, "nfe": m.nfe,
        "tokens_per_forward": m.tokens_per_forward, "n_regions": len(trace.regions), "n_steps": len(trace.steps),
        **{k: m.get(k) for k in SPECULATION},
        "wall_s": m.wall_s, "prefill_s": m.prefill_s, "decode_s": m.decode_s,
        "trace_json": trace.to_json(),
    }
    return {"pages": [page], "regions": region_rows(key, trace), "tokens": token_rows(key, trace),
            "steps": step_rows(key, trace)}


def region_rows(key: dict, trace: Trace) -> list[dict]:
    return [{**key, "region": ri, "bbox": list(r.bbox), "kind": r.kind, "text": r.text, "gt_text": r.gt_text,
             "n_tokens": len(r.tokens), "n_generated": r.n_generated, "prefill_s": r.prefill_s}
            for ri, r in enumerate(trace.regions)]


def token_rows(key: dict, trace: Trace) -> list[dict]:
    orders = {(o.region, o.index): o for o in token_orders(trace)}
    verdicts = token_verdicts(trace) if trace.is_speculative else {}
    L = trace.block_length
    rows = []
    for ri, r in enumerate(trace.regions):
        for i, (t, ok) in enumerate(zip(r.tokens, token_correctness(r))):
            o = orders.get((ri, i))
            rows.append({
                **key, "region": ri, "index": i, "text": t.text, "id": t.id, "commit_forward": t.commit_forward,
                "commit_time_s": t.commit_time_s, "confidence": t.confidence, "stop": t.stop, "box": t.box,
                "char_class": None if t.stop else char_class(t.text), "correct": None if ok < 0 else ok,
                "block": i // L if L else None, "pos_in_block": o.pos_in_block if o else None,
                "step_in_block": o.step if o else None, "block_steps": o.block_steps if o else None,
                "occluded": o.occluded if o else None, "distance_to_occlusion": o.distance if o else None,
                **verdict_columns(verdicts.get((ri, i))),
            })
    return rows


def verdict_columns(v) -> dict:
    return {"verdict": v.verdict if v else None, "draft_offset": v.offset if v else None,
            "drafted_forward": v.drafted_at if v else None}


def step_rows(key: dict, trace: Trace) -> list[dict]:
    rows = []
    for si, s in enumerate(trace.steps):
        d = step_drafts(s) if s.verdicts is not None else None
        rows.append({**key, "step": si, "forward": s.forward, "region": s.region, "block": s.block, "time_s": s.time_s,
                     "n_masked": len(s.positions), "n_committed": sum(s.committed), "n_forced": s.forced,
                     "min_confidence": min(s.confidences) if s.confidences else None,
                     "mean_confidence": mean(s.confidences) if s.confidences else None, "role": s.role,
                     "n_drafted": d.drafted if d else None, "n_verified": d.verified if d else None,
                     "n_accepted": d.accepted if d else None})
    return rows
