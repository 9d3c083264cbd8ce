"""``corpus stats`` output: the aggregates as a markdown report and the figures as one offline HTML."""

from __future__ import annotations

import json
from pathlib import Path

from mudiff_viz.corpus.stats import corpus_figures, corpus_tables
from mudiff_viz.views.labels import cer_percent
from mudiff_viz.views.markdown import md_text

SECTIONS = (  # table, heading, what it shows
    ("runs", "Runs", "one per settings hash (models, decode knobs, DPI, threads per worker)"),
    ("overview", "Runs and decoders", "pages decoded and failed, mean CER, tokens, mean tokens per forward"),
    ("cer_by_condition", "CER by probe condition",
     ("mean over pages of each page's mean CER over seeds, with its 95% Student t-interval over pages, and the "
      "range over seeds of the mean over pages")),
    ("tokens_per_forward", "Tokens per forward", "distribution over pages"),
    ("calibration_error", "Confidence calibration", "expected calibration error, ten equal confidence bins"),
    ("calibration_bins", "Reliability diagram bins", "accuracy against mean confidence per bin"),
    ("step_by_position", "Commit step against position in block",
     "mean denoising step of the block that committed the token (1 = first); block-wise decoders only"),
    ("lateness_by_class", "Lateness by character class",
     "lateness = (step - 1) / (block steps - 1): 0 = the block's first step, 1 = its last"),
    ("lateness_by_distance", "Lateness by distance to an occluded word",
     "distance in tokens to the nearest occluded token of the region"),
    ("failures", "Failed pages", "the first 100, with their one-line errors"),
)
HIDDEN = {"runs": ("settings_json",)}  # long: in tables.json
# columns holding a CER (a fraction in tables.json), shown as percentages as in every other view
CER_COLUMNS = {"overview": ("mean_cer",), "cer_by_condition": ("mean_cer", "ci_low", "ci_high", "seed_min", "seed_max")}


class Formatted(str):
    """A cell this module formatted itself (a percentage: no text from a store in it), written as is."""


def shown_rows(key: str, rows: list[dict]) -> list[dict]:
    """A table's rows as people read them: its CER columns as percentages (the other cells as they are)."""
    cer_columns = CER_COLUMNS.get(key, ())
    return [{c: Formatted(cer_percent(v)) if c in cer_columns and isinstance(v, (int, float)) else v
             for c, v in r.items()} for r in rows]


def cell(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, Formatted):
        return str(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return md_text(", ".join(map(str, value)), limit=120)
    return md_text(value, limit=120)


def markdown_table(rows: list[dict], hidden: tuple[str, ...] = ()) -> str:
    if not rows:
        return "(none)\n"
    cols = [c for c in rows[0] if c not in hidden]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def tables_markdown(tables: dict[str, list[dict]]) -> str:
    """The whole report: one section per aggregate."""
    parts = ["# Corpus statistics\n"]
    for key, heading, note in SECTIONS:
        parts.append(f"## {heading}\n\n{note}.\n\n{markdown_table(shown_rows(key, tables[key]), HIDDEN.get(key, ()))}")
    return "\n".join(parts)


def write_report(store_dir: str | Path, out_dir: str | Path, run_id: str | None = None) -> dict[str, Path]:
    """report.md, figures.html (offline: plotly.js inlined once) and tables.json in ``out_dir``."""
    tables = corpus_tables(store_dir, run_id)
    figures = corpus_figures(store_dir, run_id, tables=tables)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in ("report.md", "figures.html", "tables.json")}
    paths["report.md"].write_text(tables_markdown(tables), encoding="utf-8")
    html = [fig.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, fig in enumerate(figures.values())]
    paths["figures.html"].write_text("<!doctype html><html><head><meta charset='utf-8'><title>Corpus statistics</title>"
                                     "</head><body>" + "\n".join(html) + "</body></html>", encoding="utf-8")
    paths["tables.json"].write_text(json.dumps(tables, indent=1, default=str), encoding="utf-8")
    return paths
