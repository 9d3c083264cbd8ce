"""The Parquet trace store: one folder per table, one folder per run, one file per chunk of pages.

    DIR/runs/<run_id>.parquet                 one row: the run's settings and models
    DIR/<table>/<run_id>/part-00000.parquet   pages, regions, tokens, steps of one chunk of pages

A chunk's files share their name. Each is written to a temporary name and renamed into place, and
the pages file goes last: a chunk counts as written when its pages file exists. A run killed
mid-chunk leaves at most files without their pages file; :meth:`TraceStore.clean` removes those
before the next run writes, so a resumed run never duplicates rows. Readers (DuckDB, pyarrow) scan
``DIR/<table>/*/*.parquet`` and read only the columns and row groups a query needs, so a run of
10,000 pages is queried without loading it; every row carries (run_id, page_id, decoder), which
joins it to its page's full trace (``pages.trace_json``).
"""

from __future__ import annotations

import fcntl
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.extras import require
from mudiff_viz.core.trace import Trace
from mudiff_viz.corpus.schema import ROW_TABLES, SCHEMAS

pa = require("pyarrow", "the corpus store")
pc = require("pyarrow.compute", "the corpus store")
ds = require("pyarrow.dataset", "the corpus store")
pq = require("pyarrow.parquet", "the corpus store")

_RUN_ID = re.compile(r"^[0-9a-f]{16}$")
_PART = re.compile(r"^part-(\d{5,})\.parquet$")


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
        raise UserInputError(f"bad run id {run_id!r}: 16 hex digits")
    return run_id


def write_atomic(table: pa.Table, path: Path) -> None:
    """Write a Parquet file under a temporary name, then rename it into place (never half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def unreadable_file(root: Path) -> str | None:
    """The first Parquet file under ``root`` that pyarrow cannot open (its path inside the store),
    or None: an uploaded store is checked before DuckDB reads it."""
    for path in sorted(Path(root).rglob("*.parquet")):
        try:
            pq.ParquetFile(path).close()
        except (pa.ArrowException, OSError):
            return path.relative_to(root).as_posix()
    return None


class TraceStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)

    # ---- layout ------------------------------------------------------------------------------

    def run_dir(self, table: str, run_id: str) -> Path:
        return self.root / table / check_run_id(run_id)

    def parts(self, table: str, run_id: str | None = None) -> list[Path]:
        """The part files of a table (of one run, or of all), in chunk order."""
        if run_id:
            dirs = [self.run_dir(table, run_id)]
        else:
            dirs = sorted(p for p in (self.root / table).glob("*") if p.is_dir())
        return [f for d in dirs for f in sorted(d.glob("part-*.parquet")) if _PART.match(f.name)]

    def committed_parts(self, table: str, run_id: str | None = None) -> list[Path]:
        """Part files of chunks whose pages file exists (a chunk still being written is left out)."""
        return [f for f in self.parts(table, run_id) if (self.root / "pages" / f.parent.name / f.name).exists()]

    def run_ids(self) -> list[str]:
        return sorted(p.stem for p in (self.root / "runs").glob("*.parquet") if _RUN_ID.match(p.stem))

    def exists(self) -> bool:
        return (self.root / "runs").is_dir()

    # ---- writing -----------------------------------------------------------------------------

    @contextmanager
    def writing(self) -> Iterator["TraceStore"]:
        """Hold the store's write lock (one writer at a time) and clean up after a killed run."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "w") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise UserInputError(f"another corpus run is writing to {self.root}") from None
            self.clean()
            yield self

    def clean(self) -> int:
        """Remove temporary files and the files of chunks whose pages file was never written."""
        removed = 0
        for tmp in self.root.glob("**/.*.tmp"):
            tmp.unlink()
            removed += 1
        for run_dir in (self.root / "pages").glob("*"):
            done = {f.name for f in run_dir.glob("part-*.parquet")}
            for table in ROW_TABLES[:-1]:
                for f in (self.root / table / run_dir.name).glob("part-*.parquet"):
                    if f.name not in done:
                        f.unlink()
                        removed += 1
        for table in ROW_TABLES[:-1]:  # chunks of runs that never wrote a pages file at all
            for run_dir in (self.root / table).glob("*"):
                if not (self.root / "pages" / run_dir.name).is_dir():
                    for f in run_dir.glob("part-*.parquet"):
                        f.unlink()
                        removed += 1
        return removed

    def write_run(self, record: dict) -> None:
        """The run's one row, written once (a resumed run keeps its first creation time)."""
        path = self.root / "runs" / f"{check_run_id(record['run_id'])}.parquet"
        if not path.exists():
            write_atomic(pa.Table.from_pylist([record], schema=SCHEMAS["runs"]), path)

    def write_chunk(self, run_id: str, rows: dict[str, list[dict]]) -> str:
        """Write one chunk of pages (rows per table); returns its file name."""
        names = [f.name for table in ROW_TABLES for f in self.parts(table, run_id)]
        numbers = [int(_PART.match(n).group(1)) for n in names]
        name = f"part-{max(numbers, default=-1) + 1:05d}.parquet"
        for table in ROW_TABLES:  # pages last: it marks the chunk as written
            data = pa.Table.from_pylist(rows.get(table, []), schema=SCHEMAS[table])
            write_atomic(data, self.run_dir(table, run_id) / name)
        return name

    def forget_failed(self, run_id: str) -> int:
        """Drop a run's failed pages rows, so the next run retries them; returns how many."""
        dropped = 0
        for part in self.parts("pages", run_id):
            table = pq.read_table(part, schema=SCHEMAS["pages"])
            keep = pc.equal(table["status"], "ok")
            n = table.num_rows - pc.sum(keep).as_py() if table.num_rows else 0
            if n:
                write_atomic(table.filter(keep), part)
                dropped += n
        return dropped

    # ---- reading -----------------------------------------------------------------------------

    def dataset(self, table: str, run_id: str | None = None) -> ds.Dataset:
        return ds.dataset(self.committed_parts(table, run_id), schema=SCHEMAS[table], format="parquet")

    def read(self, table: str, run_id: str | None = None, columns: list[str] | None = None,
             where: pc.Expression | None = None) -> pa.Table:
        """A table's rows (selected columns, filtered); only the matching row groups are read."""
        return self.dataset(table, run_id).to_table(columns=columns, filter=where)

    def done(self, run_id: str) -> set[tuple[str, str]]:
        """(page_id, decoder) pairs a run has written, ok or failed."""
        t = self.read("pages", run_id, ["page_id", "decoder"])
        return set(zip(t["page_id"].to_pylist(), t["decoder"].to_pylist()))

    def runs(self) -> list[dict]:
        rows = [r for run_id in self.run_ids()
                for r in pq.read_table(self.root / "runs" / f"{run_id}.parquet", schema=SCHEMAS["runs"]).to_pylist()]
        return sorted(rows, key=lambda r: r["created"])

    def trace_json(self, run_id: str, page_id: str, decoder: str) -> str:
        """The stored trace JSON of one page (a bad key or a failed page: one-line error)."""
        where = (pc.field("page_id") == page_id) & (pc.field("decoder") == decoder)
        rows = self.read("pages", run_id, ["status", "error", "trace_json"], where).to_pylist()
        if not rows:
            raise UserInputError(f"no page {page_id!r} decoded by {decoder} in run {run_id}")
        if rows[0]["status"] != "ok":
            raise UserInputError(f"page {page_id!r} ({decoder}) failed: {rows[0]['error']}")
        return rows[0]["trace_json"]

    def trace(self, run_id: str, page_id: str, decoder: str) -> Trace:
        """One page's full Trace, validated like any loaded trace."""
        return Trace.loads(self.trace_json(run_id, page_id, decoder))


def load_page_trace(store_dir: str | Path, run_id: str, page_id: str, decoder: str) -> Trace:
    """The Trace of one stored page (what a click on a corpus figure's point opens)."""
    store = TraceStore(store_dir)
    if not store.exists():
        raise UserInputError(f"not a corpus store: {store_dir}")
    return store.trace(run_id, page_id, decoder)
