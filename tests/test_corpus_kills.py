"""A corpus run killed with SIGKILL at each point of a chunk's write, then resumed: every page decode is
in the store exactly once, and the store equals an uninterrupted run's, row for row (issue 38).

The killed run is the real command line (`python -m mudiff_viz corpus run`) in a child process; a
small wrapper kills that process, with SIGKILL, at the moment named (the store's own code is not
changed): before the second chunk's first file, with the second chunk's tokens file written under
its temporary name but not renamed, and between the second chunk's steps and pages files.
(test_corpus.py covers a kill after the first chunk and two writers at once.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mudiff_viz.corpus.runner import run_corpus
from mudiff_viz.corpus.schema import TIMING_COLUMNS
from mudiff_viz.corpus.store import TraceStore

ROOT = Path(__file__).resolve().parent.parent
MODEL, DPI = "nano-char", 100
KNOBS = ["--max-new-tokens", "24"]

KILLER = r"""
import os, signal, sys
import mudiff_viz.corpus.store as store
point = sys.argv[1]
seen = {"chunks": 0}
write_chunk, write_atomic = store.TraceStore.write_chunk, store.write_atomic

def chunk(self, run_id, rows):
    seen["chunks"] += 1
    if point == "before-chunk" and seen["chunks"] == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return write_chunk(self, run_id, rows)

def atomic(table, path):
    second = seen["chunks"] == 2
    if second and point == "mid-file" and path.parent.parent.name == "tokens":
        import pyarrow.parquet as pq
        pq.write_table(table, path.with_name(f".{path.name}.tmp"))  # the bytes are down, the rename never happens
        os.kill(os.getpid(), signal.SIGKILL)
    if second and point == "between-tables" and path.parent.parent.name == "pages":
        os.kill(os.getpid(), signal.SIGKILL)  # regions, tokens and steps are in place; pages is not
    return write_atomic(table, path)

store.TraceStore.write_chunk, store.write_atomic = chunk, atomic
from mudiff_viz.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> list[str]:
    import pymupdf

    root = tmp_path_factory.mktemp("kill-corpus")
    book = pymupdf.open()
    for k, line in enumerate(("Kill and resume, page one.", "A second page of text.", "The third and last page.")):
        page = book.new_page(width=360, height=120)
        page.insert_text((20, 40), line, fontname="cour", fontsize=12)
        page.insert_text((20, 70), f"line two of page {k + 1}", fontname="helv", fontsize=11)
    (root / "book.pdf").write_bytes(book.tobytes())
    return [f"{root / 'book.pdf'}:1-3"]


def comparable(store: Path, table: str) -> list[str]:
    rows = []
    for row in TraceStore(store).read(table).to_pylist():
        row = {k: v for k, v in row.items() if k not in TIMING_COLUMNS[table]}
        if row.get("trace_json"):
            row["trace_json"] = json.dumps(without_times(json.loads(row["trace_json"])), sort_keys=True)
        rows.append(json.dumps(row, sort_keys=True, default=str))
    return sorted(rows)


def without_times(x):
    if isinstance(x, dict):
        return {k: without_times(v) for k, v in x.items() if not k.endswith("_s")}
    if isinstance(x, list):
        return [without_times(v) for v in x]
    return x


@pytest.fixture(scope="module")
def clean(pages, tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("clean") / "store"
    run_corpus(pages, store, models=MODEL, dpi=DPI, chunk_pages=1, knobs={"max_new_tokens": 24})
    return store


@pytest.mark.parametrize("point", ["before-chunk", "mid-file", "between-tables"])
def test_a_run_killed_at_each_point_resumes_to_the_same_store(point, pages, clean, tmp_path):
    store = tmp_path / "store"
    cmd = [sys.executable, "-c", KILLER, point, "corpus", "run", *pages, "--out", str(store), "--model", MODEL,
           "--dpi", str(DPI), "--chunk-pages", "1", *KNOBS]
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, (point, proc.returncode, proc.stderr[-2000:])
    done_before = len(TraceStore(store).read("pages").to_pylist())
    assert done_before == 2  # the first chunk (one page, two decoders) and nothing of the second
    if point == "mid-file":
        assert list(store.glob("tokens/*/.part-*.parquet.tmp"))
    if point == "between-tables":
        assert len(list(store.glob("steps/*/part-*.parquet"))) == 2  # the orphan steps file of chunk 2
    summary = run_corpus(pages, store, models=MODEL, dpi=DPI, chunk_pages=1, knobs={"max_new_tokens": 24})
    assert (summary.skipped, summary.decoded) == (2, 4), point
    assert not list(store.glob("**/.*.tmp"))
    keys = [(p["page_id"], p["decoder"]) for p in TraceStore(store).read("pages").to_pylist()]
    assert len(keys) == len(set(keys)) == 6
    for table in ("pages", "regions", "tokens", "steps"):
        assert comparable(store, table) == comparable(clean, table), (point, table)
