"""A trace as pandas DataFrames built from Arrow, with the corpus store's column names and types.

``tokens_frame`` is exactly the store's ``tokens`` table for one page (corpus/rows.py builds the
rows, corpus/schema.py types them), so an analysis written for one page runs unchanged on a store
of ten thousand (``mv.open_store(...).sql("SELECT ... FROM tokens")``). ``steps_frame`` has one row
per (step, masked position): the store's ``steps`` columns (per step, repeated on each of its
positions) followed by the position's own record (:data:`STEP_POSITIONS`). The store keeps only
the per-step columns; its ``pages.trace_json`` holds the rest (``Store.page(i).steps_frame()``).

Columns are ``pd.ArrowDtype`` (nullable, exactly the Arrow types), so a frame written to Parquet
reads back with the same types.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import VERDICTS, Trace
from mudiff_viz.corpus.rows import step_rows, token_rows
from mudiff_viz.corpus.schema import STEPS, TOKENS

# the per-position columns of steps_frame, after the corpus steps table's columns
POSITION_FIELDS = [
    ("position", pa.int32()),  # token index in its region (positions after the stop are block filler)
    ("candidate_id", pa.int64()),  # the token the forward guessed (the committed one where committed)
    ("candidate", pa.string()),  # its display text (trace.vocab)
    ("confidence", pa.float64()),
    ("committed", pa.bool_()),  # committed at this step
    ("topk_ids", pa.list_(pa.int64())),  # the best alternatives, best first
    ("topk_probs", pa.list_(pa.float64())),
    ("verdict", pa.string()),  # draft and verify: drafted | accepted | rejected | discarded | bonus (null otherwise)
    ("draft_id", pa.int64()),  # the draft this forward verified at the position (null: none)
]
STEP_POSITIONS = pa.schema(list(STEPS) + POSITION_FIELDS)
Key = str | None  # run_id, page_id, decoder: a store's row key (None: not in a store)


def _key(trace: Trace, run_id: Key, page_id: Key, decoder: Key) -> dict:
    """The store's row key (``Store.key(i)``); a trace that is not in a store has nulls there."""
    if decoder not in (None, trace.decoder):
        raise UserInputError(f"this trace was decoded by {trace.decoder}, not {decoder}")
    return {"run_id": run_id, "page_id": page_id, "decoder": trace.decoder}


def to_frame(table: pa.Table) -> pd.DataFrame:
    """Arrow -> pandas keeping every column's Arrow type (nullable ints and bools stay what they are)."""
    return table.to_pandas(types_mapper=pd.ArrowDtype)


def tokens_table(trace: Trace, run_id: Key = None, page_id: Key = None, decoder: Key = None) -> pa.Table:
    return pa.Table.from_pylist(token_rows(_key(trace, run_id, page_id, decoder), trace), schema=TOKENS)


def tokens_frame(trace: Trace, run_id: Key = None, page_id: Key = None, decoder: Key = None) -> pd.DataFrame:
    """One row per token (region, index, text, id, commit forward and time, confidence, box, right or
    wrong against the ground truth, block and step in block): the corpus ``tokens`` table's columns."""
    return to_frame(tokens_table(trace, run_id, page_id, decoder))


def steps_table(trace: Trace, run_id: Key = None, page_id: Key = None, decoder: Key = None) -> pa.Table:
    rows = []
    for step, s in zip(step_rows(_key(trace, run_id, page_id, decoder), trace), trace.steps):
        verdicts = s.verdicts or [None] * len(s.positions)
        drafts = s.drafts or [-1] * len(s.positions)
        for pos, cand, conf, done, topk, v, d in zip(s.positions, s.candidates, s.confidences, s.committed, s.topk,
                                                     verdicts, drafts):
            rows.append({**step, "position": pos, "candidate_id": cand, "candidate": trace.token_text(cand),
                         "confidence": conf, "committed": bool(done), "topk_ids": [int(i) for i, _ in topk],
                         "topk_probs": [float(p) for _, p in topk], "verdict": None if v is None else VERDICTS[v],
                         "draft_id": d if d >= 0 else None})
    return pa.Table.from_pylist(rows, schema=STEP_POSITIONS)


def steps_frame(trace: Trace, run_id: Key = None, page_id: Key = None, decoder: Key = None) -> pd.DataFrame:
    """One row per (step, masked position): forward, region, block, the guess and its confidence,
    whether it was committed, the top-k; plus the corpus ``steps`` table's per-step columns."""
    return to_frame(steps_table(trace, run_id, page_id, decoder))
