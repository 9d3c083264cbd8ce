"""The Parquet trace store's tables as explicit Arrow schemas.

Explicit types keep every part file of a table alike (a chunk whose pages all failed still writes
typed nulls), so DuckDB and pyarrow read a whole table as one. docs/corpus.md describes each column.
"""

from __future__ import annotations

from mudiff_viz.core.extras import require

pa = require("pyarrow", "the corpus store")


STORE_VERSION = 3  # bump when a column changes meaning; part of every run id (2: draft-and-verify columns; 3: anchor_hits)

KEY = [("run_id", pa.string()), ("page_id", pa.string()), ("decoder", pa.string())]
BOX = pa.list_(pa.float64())

RUNS = pa.schema([
    ("run_id", pa.string()),
    ("created", pa.string()),  # ISO 8601, UTC
    ("settings_json", pa.string()),  # knobs, dpi, threads per worker, store and trace versions
    ("models_json", pa.string()),  # decoder -> model spec
    ("decoders", pa.list_(pa.string())),
])

PAGES = pa.schema(KEY + [
    ("source", pa.string()),  # the input path as given
    ("source_sha256", pa.string()),
    ("page_index", pa.int32()),  # 0-based
    ("level", pa.float64()),  # Semantic Shuffle level
    ("occlusion", pa.float64()),  # occluded word fraction
    ("degrade", pa.string()),  # "none" or the degradation spec, e.g. "dpi=72,blur=1"
    ("seed", pa.int32()),  # the probes' seed
    ("variant", pa.string()),  # level, occlusion, degradation and seed in one label
    ("model", pa.string()),
    ("status", pa.string()),  # "ok" | "failed"
    ("error", pa.string()),  # one line, failed pages only
    ("cer", pa.float64()),  # against the page's ground truth (null without one)
    ("gt_chars", pa.int32()),
    ("tokens", pa.int32()),
    ("nfe", pa.int32()),
    ("tokens_per_forward", pa.float64()),
    ("mean_confidence", pa.float64()),
    ("error_tokens", pa.int32()),
    ("confident_error_tokens", pa.int32()),
    ("occluded_words", pa.int32()),
    ("recovered_words", pa.int32()),
    ("recovery_rate", pa.float64()),
    ("cer_rest", pa.float64()),
    ("first_step_share", pa.float64()),
    ("draft_forwards", pa.int32()),  # draft and verify (null for the other decoders): forwards that drafted ...
    ("verify_forwards", pa.int32()),  # ... and that verified
    ("drafted", pa.int32()),  # drafts verified
    ("accepted", pa.int32()),  # drafts kept
    ("anchor_hits", pa.int32()),  # self-speculative: forwards whose next drafts came from a runner-up branch
    ("n_regions", pa.int32()),
    ("n_steps", pa.int32()),
    ("wall_s", pa.float64()),
    ("prefill_s", pa.float64()),
    ("decode_s", pa.float64()),
    ("trace_json", pa.string()),  # the full single-page trace (docs/trace.md); null for failed pages
])

REGIONS = pa.schema(KEY + [
    ("region", pa.int32()),
    ("bbox", BOX),
    ("kind", pa.string()),
    ("text", pa.string()),
    ("gt_text", pa.string()),
    ("n_tokens", pa.int32()),
    ("n_generated", pa.int32()),
    ("prefill_s", pa.float64()),
])

TOKENS = pa.schema(KEY + [
    ("region", pa.int32()),
    ("index", pa.int32()),  # token index in its region
    ("text", pa.string()),
    ("id", pa.int64()),
    ("commit_forward", pa.int32()),
    ("commit_time_s", pa.float64()),
    ("confidence", pa.float64()),
    ("stop", pa.bool_()),
    ("box", BOX),
    ("char_class", pa.string()),  # letter | digit | punctuation | space | newline | other | mixed; null: stop
    ("correct", pa.int8()),  # 1: every character aligns equal to the ground truth, 0: not, null: unknown
    ("block", pa.int32()),  # block-wise decoders only (null for AR)
    ("pos_in_block", pa.int32()),
    ("step_in_block", pa.int32()),  # denoising step of its block that committed it (1 = first)
    ("block_steps", pa.int32()),  # denoising steps its block took
    ("occluded", pa.bool_()),
    ("distance_to_occlusion", pa.int32()),  # tokens to the nearest occluded token of its region
    ("verdict", pa.string()),  # draft and verify: "accepted" | "rejected" (the verifier's token replaced a draft) | "bonus"
    ("draft_offset", pa.int32()),  # its distance from the frontier of the verify forward that committed it
    ("drafted_forward", pa.int32()),  # the forward that drafted its position (null: none did)
])

STEPS = pa.schema(KEY + [
    ("step", pa.int32()),  # index in the trace's steps
    ("forward", pa.int32()),
    ("region", pa.int32()),
    ("block", pa.int32()),
    ("time_s", pa.float64()),
    ("n_masked", pa.int32()),  # masked positions the step predicted
    ("n_committed", pa.int32()),
    ("n_forced", pa.int32()),
    ("min_confidence", pa.float64()),
    ("mean_confidence", pa.float64()),
    ("role", pa.string()),  # "verifier" when a speculative decode's verifier ran the forward
    ("n_drafted", pa.int32()),  # draft and verify: drafts this forward proposed ...
    ("n_verified", pa.int32()),  # ... drafts it verified (acceptance at offset o: n_accepted > o among n_verified > o)
    ("n_accepted", pa.int32()),  # ... and kept
])

SCHEMAS: dict[str, pa.Schema] = {"runs": RUNS, "pages": PAGES, "regions": REGIONS, "tokens": TOKENS, "steps": STEPS}
ROW_TABLES = ("regions", "tokens", "steps", "pages")  # written in this order: pages last, it marks a chunk done
TIMING_COLUMNS = {
    "runs": {"created"},
    "pages": {"wall_s", "prefill_s", "decode_s"},  # and inside trace_json: every "*_s" field
    "regions": {"prefill_s"},
    "tokens": {"commit_time_s"},
    "steps": {"time_s"},
}
