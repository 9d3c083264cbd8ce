"""A corpus store (docs/corpus.md) from Python: SQL through DuckDB, tables as frames, pages as Traces.

The frames have the same columns and Arrow types as ``Trace.tokens_frame()`` and the per-step
columns of ``Trace.steps_frame()`` (notebook/frames.py), so one analysis runs on one page or on the
whole store.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.corpus.schema import SCHEMAS
from mudiff_viz.corpus.stats import connect
from mudiff_viz.corpus.store import TraceStore
from mudiff_viz.notebook.frames import to_frame

SHIPPED_STORE = Path(__file__).resolve().parents[2] / "assets" / "corpus"  # 240 decodes (docs/corpus.md)
PAGE_KEY = ("run_id", "page_id", "decoder")


class Store:
    """An opened store: ``sql(query)``, ``table(name)``, ``pages()`` and ``page(i) -> Trace``."""

    def __init__(self, path: str | Path | None = None, run_id: str | None = None):
        self.path = Path(path) if path is not None else SHIPPED_STORE
        self.con = connect(self.path, run_id)  # views pages, regions, tokens, steps, runs (one-line errors)
        self._store = TraceStore(self.path)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}: {len(self.pages())} decoded pages)"

    def sql(self, query: str, params: list | None = None) -> pd.DataFrame:
        """A DuckDB query over the tables (pages, regions, tokens, steps, runs) as a frame."""
        try:
            relation = self.con.sql(query, params=params)
        except Exception as exc:  # DuckDB's parser, binder and catalog errors: one line
            raise UserInputError(f"query failed: {str(exc).splitlines()[0]}") from None
        if relation is None:  # a statement that returns no rows
            return pd.DataFrame()
        fetch = getattr(relation, "to_arrow_table", None) or relation.arrow  # DuckDB 2 / 1
        return to_frame(fetch())

    def table(self, name: str) -> pd.DataFrame:
        """A whole table (``pages`` without its trace JSON column) with the corpus schema's types."""
        if name not in SCHEMAS:
            raise UserInputError(f"no table {name!r}; tables are {', '.join(SCHEMAS)}")
        columns = [f.name for f in SCHEMAS[name] if f.name != "trace_json"]
        return self.sql(f"SELECT {', '.join(columns)} FROM {name}")

    def pages(self) -> pd.DataFrame:
        """The decoded pages in a fixed order (run, page, decoder): row ``i`` is ``page(i)``."""
        return self.sql("SELECT run_id, page_id, decoder, source, page_index, variant, cer, tokens, tokens_per_forward "
                        "FROM pages WHERE status = 'ok' ORDER BY run_id, page_id, decoder")

    def key(self, i: int) -> dict:
        """``{run_id, page_id, decoder}`` of page ``i``."""
        pages = self.pages()
        if not -len(pages) <= i < len(pages):
            raise UserInputError(f"page {i} is out of range: the store has {len(pages)} decoded pages")
        row = pages.iloc[i]
        return {k: row[k] for k in PAGE_KEY}

    def page(self, i: int) -> Trace:
        """The full Trace of page ``i`` (validated like any loaded trace); plays with no model."""
        return self._store.trace(**self.key(i))


def open_store(path: str | Path | None = None, run_id: str | None = None) -> Store:
    """Open a corpus store written by ``python -m mudiff_viz corpus run`` (default: the shipped one)."""
    return Store(path, run_id)
