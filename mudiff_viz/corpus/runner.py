"""``run_corpus``: every page x probe variant x decoder into the Parquet trace store.

The run's id is a hash of what determines its rows (models, decode knobs, DPI, threads per
worker, store and trace versions), so rerunning the same command resumes: the store already
holds some (run_id, page_id, decoder) keys and only the rest are decoded. A page that fails is
written as failed with its one-line error and the run goes on. Results are written in chunks as
they arrive (store.py: atomic, pages last), so a killed run loses at most the unwritten chunk.

Without ``ray_address`` pages are decoded in this process; with it, by Ray actors (ray_pool.py).
Both run :class:`~mudiff_viz.corpus.worker.PageDecoder`, so the rows are the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

import torch

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits, current
from mudiff_viz.core.trace import SCHEMA_VERSION
from mudiff_viz.corpus.grid import ProbeGrid
from mudiff_viz.corpus.ray_pool import RayPool, connect
from mudiff_viz.corpus.schema import STORE_VERSION
from mudiff_viz.corpus.sources import SourceFile, collect_sources
from mudiff_viz.corpus.store import TraceStore
from mudiff_viz.corpus.worker import DecodeConfig, PageDecoder, PageTask, Rows, merge_rows, process_usage
from mudiff_viz.decoding.decoders import get_decoder
from mudiff_viz.decoding.pipeline import make_params
from mudiff_viz.decoding.settings import KNOBS, for_weights
from mudiff_viz.inputs.pages import read_source
from mudiff_viz.probes.bench import parse_models

Progress = Callable[[int, int, str], None]
OnResult = Callable[[PageTask, Rows], None]


@dataclass
class RunSummary:
    run_id: str
    store: Path
    planned: int  # page variants x decoders in the grid
    skipped: int  # already in the store
    decoded: int  # written by this run (ok or failed)
    failed: int
    pages: int  # page variants written by this run (all their decoders)
    wall_s: float
    first_page_s: float  # from the start to the first finished page (planning, workers, models)
    workers: int
    usage: dict = field(default_factory=dict)  # peak_rss_mb and cpu_s of the "driver" and, on Ray, each of "workers"

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def steady_pages_per_s(self) -> float:
        """Pages per second after the first page (start-up left out)."""
        span = self.wall_s - self.first_page_s
        return (self.pages - 1) / span if self.pages > 1 and span > 0 else 0.0

    def line(self) -> str:
        parts = [("driver", self.usage.get("driver"))] + [("worker", u) for u in self.usage.get("workers", [])]
        mem = ", ".join(f"{name} {u['peak_rss_mb']:.0f} MB / {u['cpu_s']:.0f} CPU s" for name, u in parts if u)
        return (f"run {self.run_id}: {self.decoded} decodes written ({self.failed} failed), "
                f"{self.skipped} already done; "
                f"{self.pages} pages in {self.wall_s:.1f} s = {self.pages_per_s:.2f} pages/s "
                f"({self.steady_pages_per_s:.2f} after the first page at {self.first_page_s:.1f} s) on {self.workers} "
                f"worker(s); peak memory / CPU time: {mem} -> {self.store}")


def run_settings(models: dict[str, str], knobs: dict, dpi: float, threads: int) -> dict:
    return {"store_version": STORE_VERSION, "trace_schema": SCHEMA_VERSION, "models": models, "knobs": knobs,
            "dpi": dpi, "threads": threads}


def run_id_of(settings: dict) -> str:
    """16 hex digits of the settings' hash: equal settings, equal id (that is what resumes)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def plan_tasks(sources: Sequence[SourceFile], grid: ProbeGrid, decoders: Sequence[str],
               done: set[tuple[str, str]]) -> tuple[list[PageTask], int]:
    """Tasks for the decodes not in the store yet (grouped by file), and how many were skipped."""
    tasks, skipped = [], 0
    for src in sources:
        for page_index in src.pages:
            for variant in grid.variants():
                task = PageTask(src, page_index, variant, tuple(decoders))
                todo = tuple(d for d in decoders if (task.page_id, d) not in done)
                skipped += len(decoders) - len(todo)
                if todo:
                    tasks.append(PageTask(src, page_index, variant, todo))
    return tasks, skipped


class FileBytes:
    """Each input file read once while its pages are in flight (``put``: into Ray's object store)."""

    def __init__(self, tasks: Sequence[PageTask], limits: Limits, put: Callable[[bytes], object] = lambda b: b):
        self.limits, self.put = limits, put
        self.remaining: dict[str, int] = {}
        for t in tasks:
            self.remaining[t.source.path] = self.remaining.get(t.source.path, 0) + 1
        self.cache: dict[str, object] = {}

    def get(self, task: PageTask) -> object:
        path = task.source.path
        if path not in self.cache:
            data = b"" if task.source.kind == "unreadable" else read_source(path, self.limits)[0]
            self.cache[path] = self.put(data)
        return self.cache[path]

    def release(self, task: PageTask) -> None:
        path = task.source.path
        self.remaining[path] -= 1
        if not self.remaining[path]:
            self.cache.pop(path, None)


class ChunkWriter:
    """Buffers finished pages and writes them to the store every ``chunk_pages`` pages; the run's
    record goes in with the first chunk (a run that decodes nothing leaves no trace)."""

    def __init__(self, store: TraceStore, run_record: dict, chunk_pages: int):
        self.store, self.run_record, self.chunk_pages = store, run_record, max(1, chunk_pages)
        self.buffer: list[Rows] = []
        self.decoded = self.failed = self.pages = 0
        self.first_result_at: float | None = None

    def add(self, rows: Rows) -> None:
        if self.first_result_at is None:
            self.first_result_at = time.monotonic()
        self.buffer.append(rows)
        self.pages += 1
        self.decoded += len(rows["pages"])
        self.failed += sum(r["status"] != "ok" for r in rows["pages"])
        if len(self.buffer) >= self.chunk_pages:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            self.store.write_run(self.run_record)
            self.store.write_chunk(self.run_record["run_id"], merge_rows(self.buffer))
            self.buffer = []


def run_corpus(
    inputs: Sequence[str],
    out_dir: str | Path,
    decoders: Sequence[str] = ("diffusion", "ar"),
    models: str | dict[str, str] = "nano",
    knobs: dict | None = None,
    grid: ProbeGrid | None = None,
    workers: int | None = None,
    ray_address: str | None = None,
    progress: Progress | None = None,
    dpi: float = 150,
    threads: int = 1,
    limits: Limits | None = None,
    chunk_pages: int = 32,
    retry_failed: bool = False,
) -> RunSummary:
    """Decode every page of ``inputs`` (specs as in corpus/sources.py) at every variant of ``grid``
    with each decoder into the store at ``out_dir``, skipping what it already holds.

    ``models``: one spec for every decoder or ``diffusion=SPEC,ar=SPEC`` (or a dict). ``knobs``:
    decode knobs (decoding/settings.py); the temperature must be 0 (deterministic rows).
    ``ray_address``: None decodes in this process; "auto", "local" or a cluster address use Ray
    with ``workers`` actors (default: one per GPU, else one per ``threads`` CPUs).
    ``retry_failed`` decodes the run's failed pages again.
    """
    limits = limits or current()
    start = time.monotonic()
    decoders = list(dict.fromkeys(decoders))
    if not decoders:
        raise UserInputError("no decoders given")
    for d in decoders:
        get_decoder(d)
    specs = dict(models) if isinstance(models, dict) else parse_models(models, decoders)
    missing = [d for d in decoders if d not in specs]
    if missing:
        raise UserInputError(f"no model given for decoder(s) {', '.join(missing)}")
    params = make_params(limits, **(knobs or {}))
    sampled = [d for d in decoders if for_weights(params, get_decoder(d).backend_kind)[0].temperature != 0]
    if sampled:  # checked per decoder: a preset gives an AR model its own client's (greedy) settings
        raise UserInputError(f"a corpus decodes deterministically: the temperature must be 0 ({sampled[0]} samples)")
    if threads < 1 or (workers is not None and workers < 1):
        raise UserInputError("workers and threads must be at least 1")
    if workers and workers > 1 and ray_address is None:
        raise UserInputError("more than one worker needs Ray: add --ray auto (a local instance) or --ray ADDRESS")
    knob_values = {k.name: getattr(params, k.name) for k in KNOBS}
    settings = run_settings({d: specs[d] for d in decoders}, knob_values, float(dpi), threads)
    run_id = run_id_of(settings)
    config = DecodeConfig(run_id=run_id, models={d: specs[d] for d in decoders}, knobs=knob_values, dpi=float(dpi),
                          threads=threads, limits=limits)
    grid = grid or ProbeGrid()
    sources = collect_sources(inputs, limits)
    store = TraceStore(out_dir)
    with store.writing():
        if retry_failed:
            store.forget_failed(run_id)
        done = store.done(run_id)
        tasks, skipped = plan_tasks(sources, grid, decoders, done)
        record = {"run_id": run_id, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  "settings_json": json.dumps(settings, sort_keys=True), "models_json": json.dumps(config.models),
                  "decoders": decoders}
        writer = ChunkWriter(store, record, chunk_pages)
        n_workers, worker_usage = _decode_all(config, tasks, writer, workers, ray_address, progress, limits)
    return RunSummary(run_id=run_id, store=Path(out_dir), planned=skipped + sum(len(t.decoders) for t in tasks),
                      skipped=skipped, decoded=writer.decoded, failed=writer.failed, pages=writer.pages,
                      wall_s=time.monotonic() - start, workers=n_workers,
                      first_page_s=(writer.first_result_at or time.monotonic()) - start,
                      usage={"driver": process_usage(), **({"workers": worker_usage} if worker_usage else {})})


def _decode_all(config: DecodeConfig, tasks: list[PageTask], writer: ChunkWriter, workers: int | None,
                ray_address: str | None, progress: Progress | None, limits: Limits) -> tuple[int, list[dict]]:
    """Decode the tasks in this process or on Ray, streaming results to the writer; returns the
    worker count and the workers' usage (Ray only)."""
    if not tasks:
        return 0, []
    files = FileBytes(tasks, limits)

    def on_result(task: PageTask, rows: Rows) -> None:
        files.release(task)
        writer.add(rows)
        if progress:
            status = ", ".join(f"{r['decoder']} {r['status']}" for r in rows["pages"])
            name = f"{Path(task.source.path).name} p{task.page_index + 1}"
            variant = "" if task.variant.untouched else f" [{task.variant.label}]"
            progress(writer.pages, len(tasks), f"{name}{variant}: {status}")

    try:
        if ray_address is None:
            _decode_in_process(config, tasks, files, on_result)
            return 1, []
        return _decode_on_ray(config, tasks, files, on_result, workers, ray_address)
    finally:
        writer.flush()  # also on Ctrl-C: what finished is kept


def _decode_in_process(config: DecodeConfig, tasks: list[PageTask], files: FileBytes, on_result: OnResult) -> None:
    threads_before = torch.get_num_threads()
    try:
        decoder = PageDecoder(config)
        decoder.load_models()
        for task in tasks:
            on_result(task, decoder.decode(task, files.get(task)))
    finally:
        torch.set_num_threads(threads_before)


def _decode_on_ray(config: DecodeConfig, tasks: list[PageTask], files: FileBytes, on_result: OnResult,
                   workers: int | None, ray_address: str) -> tuple[int, list[dict]]:
    connected = connect(ray_address, local_cpus=(workers or os.cpu_count() or 1) * config.threads)
    import ray

    try:
        files.put = ray.put  # each file into the object store once, shared by its pages' tasks
        pool = RayPool(config, workers)
        pool.run(tasks, files.get, on_result)
        return len(pool.actors), pool.usage()
    finally:
        if connected:
            ray.shutdown()
