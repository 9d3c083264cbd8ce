"""Decoding order in aggregate: DuckDB over the store's Parquet files (docs/corpus.md#stats).

Every aggregate is one SQL query over the tables' part files, so a large run is scanned, never
loaded. Definitions (the tests recompute each by hand):

- **step in block**: the denoising step of its block that committed a token (1 = the first);
  **lateness** = (step - 1) / (block steps - 1), 0 = committed at the block's first step,
  1 = at its last (0 for a block done in one step). Block-wise decoders only. **Last-step share**:
  the share of tokens committed at the last step of a block that took more than one step.
- **calibration**: tokens whose correctness is known (``tokens.correct``, the player's per-token
  alignment with the ground truth; stop tokens and pages without ground truth excluded) in ten
  equal confidence bins [0, 0.1), ..., [0.9, 1.0]; ECE = sum over bins of n_bin / n * |accuracy -
  mean confidence|.
- **CER by condition**: per page, the mean CER over seeds; then the mean over pages with a 95%
  Student t-interval over those page means (pages are the sampling unit, seeds are nested in
  them); the seed range is the min and max over seeds of the mean over pages.

The UI calls :func:`corpus_tables`, :func:`corpus_figures` and :func:`load_page_trace` (a click on a
page's point: its ``customdata`` is [run_id, page_id, decoder]).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.extras import require
from mudiff_viz.core.order import DISTANCE_BINS
from mudiff_viz.corpus.figures import build_figures
from mudiff_viz.corpus.intervals import mean_interval
from mudiff_viz.corpus.schema import SCHEMAS
from mudiff_viz.corpus.store import TraceStore, check_run_id, load_page_trace

duckdb = require("duckdb", "corpus statistics")
pa = require("pyarrow", "corpus statistics")

__all__ = ["connect", "corpus_figures", "corpus_tables", "load_page_trace", "page_points"]

CALIBRATION_BINS = 10
LATENESS = "CASE WHEN block_steps > 1 THEN (step_in_block - 1)::DOUBLE / (block_steps - 1) ELSE 0.0 END"
LAST_STEP = "CASE WHEN block_steps > 1 AND step_in_block = block_steps THEN 1.0 ELSE 0.0 END"
NO_OCCLUSION = "none in region"


def connect(store_dir: str | Path, run_id: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with one view per table over the store's part files (of one run or all)."""
    store = TraceStore(store_dir)
    if not store.exists():
        raise UserInputError(f"not a corpus store (no runs/ folder): {store_dir}")
    if run_id is not None:
        check_run_id(run_id)
        if run_id not in store.run_ids():
            raise UserInputError(f"no run {run_id} in {store_dir}")
    con = duckdb.connect()
    for table in ("pages", "regions", "tokens", "steps"):
        files = [str(p) for p in store.committed_parts(table, run_id)]
        if files:
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet({_sql_list(files)})")
        else:
            con.register(table, pa.Table.from_pylist([], schema=SCHEMAS[table]))
    runs = pa.Table.from_pylist([r for r in store.runs() if run_id in (None, r["run_id"])], schema=SCHEMAS["runs"])
    con.register("runs", runs)
    return con


def _sql_list(items: list[str]) -> str:
    return "[" + ", ".join("'" + s.replace("'", "''") + "'" for s in items) + "]"


def query(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> list[dict]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


# ---- the aggregates -------------------------------------------------------------------------------


def overview(con) -> list[dict]:
    return query(con, """
        SELECT run_id, decoder, count(*) FILTER (status = 'ok') AS pages_ok, count(*) FILTER (status <> 'ok') AS failed,
               avg(cer) AS mean_cer, sum(tokens) AS tokens, avg(tokens_per_forward) AS mean_tokens_per_forward,
               avg(wall_s) AS mean_wall_s
        FROM pages GROUP BY ALL ORDER BY run_id, decoder""")


def failures(con, limit: int = 100) -> list[dict]:
    return query(con, f"""
        SELECT run_id, page_id, decoder, source, page_index + 1 AS page, error FROM pages
        WHERE status <> 'ok' ORDER BY source, page_index, page_id, decoder LIMIT {int(limit)}""")


def step_by_position(con) -> list[dict]:
    """Commit step against position in block (block-wise decoders)."""
    return query(con, f"""
        SELECT decoder, pos_in_block, count(*) AS tokens, avg(step_in_block) AS mean_step,
               avg({LATENESS}) AS mean_lateness
        FROM tokens WHERE step_in_block IS NOT NULL GROUP BY ALL ORDER BY decoder, pos_in_block""")


def lateness_by_class(con) -> list[dict]:
    """Lateness by character class (letters, digits, punctuation, space, newline, ...)."""
    return query(con, f"""
        SELECT decoder, char_class, count(*) AS tokens, avg(step_in_block) AS mean_step,
               avg({LATENESS}) AS mean_lateness, avg({LAST_STEP}) AS last_step_share
        FROM tokens WHERE step_in_block IS NOT NULL AND char_class IS NOT NULL
        GROUP BY ALL ORDER BY decoder, char_class""")


def distance_bin_sql() -> str:
    cases = " ".join(f"WHEN distance_to_occlusion BETWEEN {lo} AND {hi} THEN '{label}'"
                     for lo, hi, label in DISTANCE_BINS)
    return f"CASE {cases} ELSE '{NO_OCCLUSION}' END"


def lateness_by_distance(con) -> list[dict]:
    """Lateness by distance (tokens) to the nearest occluded token of the region (core/order.py bins)."""
    order = {label: i for i, (_, _, label) in enumerate(DISTANCE_BINS)}
    rows = query(con, f"""
        SELECT decoder, {distance_bin_sql()} AS distance, count(*) AS tokens, avg(step_in_block) AS mean_step,
               avg({LATENESS}) AS mean_lateness, avg({LAST_STEP}) AS last_step_share
        FROM tokens WHERE step_in_block IS NOT NULL GROUP BY ALL""")
    return sorted(rows, key=lambda r: (r["decoder"], order.get(r["distance"], len(order))))


def tokens_per_forward(con) -> list[dict]:
    """Distribution over pages of tokens per forward, per decoder."""
    return query(con, """
        SELECT decoder, count(*) AS pages, avg(tokens_per_forward) AS mean, min(tokens_per_forward) AS min,
               quantile_cont(tokens_per_forward, 0.1) AS p10, median(tokens_per_forward) AS median,
               quantile_cont(tokens_per_forward, 0.9) AS p90, max(tokens_per_forward) AS max
        FROM pages WHERE status = 'ok' GROUP BY ALL ORDER BY decoder""")


def calibration(con, bins: int = CALIBRATION_BINS) -> tuple[list[dict], list[dict]]:
    """Reliability diagram bins and the expected calibration error, per decoder."""
    rows = query(con, f"""
        SELECT decoder, least(floor(confidence * {bins})::INTEGER, {bins - 1}) AS bin, count(*) AS tokens,
               avg(confidence) AS mean_confidence, avg(correct::DOUBLE) AS accuracy
        FROM tokens WHERE correct IS NOT NULL GROUP BY ALL ORDER BY decoder, bin""")
    for r in rows:
        r["low"], r["high"] = r["bin"] / bins, (r["bin"] + 1) / bins
    per_decoder: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        per_decoder[r["decoder"]].append(r)
    ece = []
    for decoder, rs in per_decoder.items():
        n = sum(r["tokens"] for r in rs)
        ece.append({"decoder": decoder, "tokens": n,
                    "accuracy": sum(r["accuracy"] * r["tokens"] for r in rs) / n,
                    "mean_confidence": sum(r["mean_confidence"] * r["tokens"] for r in rs) / n,
                    "ece": sum(r["tokens"] / n * abs(r["accuracy"] - r["mean_confidence"]) for r in rs)})
    return rows, ece


def cer_by_condition(con) -> list[dict]:
    """CER per decoder and probe condition: mean over pages (of each page's mean over seeds) with a
    95% t-interval, and the range over seeds of the mean over pages."""
    cond = "decoder, level, occlusion, degrade"
    per_page = query(con, f"""
        SELECT {cond}, avg(cer) AS cer FROM pages WHERE status = 'ok' AND cer IS NOT NULL
        GROUP BY {cond}, source_sha256, page_index""")
    per_seed = query(con, f"""
        SELECT {cond}, seed, avg(cer) AS cer FROM pages WHERE status = 'ok' AND cer IS NOT NULL GROUP BY ALL""")
    pages, seeds = defaultdict(list), defaultdict(list)
    for r in per_page:
        pages[(r["decoder"], r["level"], r["occlusion"], r["degrade"])].append(r["cer"])
    for r in per_seed:
        seeds[(r["decoder"], r["level"], r["occlusion"], r["degrade"])].append(r["cer"])
    out = []
    for key in sorted(pages, key=lambda k: (k[0], k[1], k[2], k[3] != "none", k[3])):
        m, lo, hi = mean_interval(pages[key])
        out.append({"decoder": key[0], "level": key[1], "occlusion": key[2], "degrade": key[3],
                    "pages": len(pages[key]), "seeds": len(seeds[key]), "mean_cer": m, "ci_low": lo, "ci_high": hi,
                    "seed_min": min(seeds[key]), "seed_max": max(seeds[key])})
    return out


def page_points(con) -> list[dict]:
    """One point per decoded page (what figures plot and a click opens)."""
    return query(con, """
        SELECT run_id, page_id, decoder, source, page_index, level, occlusion, degrade, seed, cer, tokens,
               tokens_per_forward FROM pages WHERE status = 'ok' ORDER BY run_id, page_id, decoder""")


# ---- what the CLI and the UI call -----------------------------------------------------------------


def corpus_tables(store_dir: str | Path, run_id: str | None = None) -> dict[str, list[dict]]:
    """Every aggregate of a store (one run, or all runs pooled) as lists of row dicts."""
    con = connect(store_dir, run_id)
    try:
        bins, ece = calibration(con)
        return {
            "runs": query(con, "SELECT run_id, created, decoders, models_json, settings_json FROM runs "
                               "ORDER BY created"),
            "overview": overview(con),
            "cer_by_condition": cer_by_condition(con),
            "tokens_per_forward": tokens_per_forward(con),
            "calibration_error": ece,
            "calibration_bins": bins,
            "step_by_position": step_by_position(con),
            "lateness_by_class": lateness_by_class(con),
            "lateness_by_distance": lateness_by_distance(con),
            "failures": failures(con),
        }
    finally:
        con.close()


def corpus_figures(store_dir: str | Path, run_id: str | None = None, tables: dict | None = None) -> dict:
    """Plotly figures of the aggregates; points standing for a page carry [run_id, page_id, decoder]
    in ``customdata``. ``tables``: :func:`corpus_tables`' result, when already computed."""
    tables = tables or corpus_tables(store_dir, run_id)
    con = connect(store_dir, run_id)
    try:
        points = page_points(con)
    finally:
        con.close()
    return build_figures(tables, points)
