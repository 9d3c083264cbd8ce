"""The batch regime of the real models: several regions of one page in one batch vs one at a time.

``python -m mudiff_viz bench --region-batch --model DIR``. A page's text blocks (found as the nano
models find them, mudiff_viz/inputs/regions.py: regions of different sizes, as a layout pass gives)
are read with the text prompt by a real backend twice, warm, medians over repeats: as one batch
(the backend's ``can_batch_regions`` path) and one region at a time (decode_sequential, as the
release runs). The batch must give the same tokens; ``batch_speedup`` is the one-at-a-time decode
time over the batch's (prefill excluded, reported separately). The batch always runs eagerly; one region at a time runs
as the backend is set (CUDA graphs on a GPU unless ``MUDIFF_CUDA_GRAPHS=0``). Nothing here asserts
timings.
"""

from __future__ import annotations

import statistics

from models.mineru_common.tasks import TEXT_PROMPT
from models.registry import load_backend
from mudiff_viz.bench.speed import bench_pages
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.types import Region, RegionUnit
from mudiff_viz.decoding.decoders import get_decoder
from mudiff_viz.decoding.sequential import decode_sequential
from mudiff_viz.decoding.settings import DecodeParams
from mudiff_viz.inputs.regions import find_regions

DECODERS = ("diffusion", "ar")  # the decoders whose real backends batch regions
MAX_LINES = 3  # lines per text block: blocks of 1-3 lines, so regions of different heights


def page_blocks(page, max_regions: int) -> list[Region]:
    """Up to ``max_regions`` text blocks of the page, each asked with the text prompt."""
    blocks = find_regions(page, RegionUnit("block", MAX_LINES))[:max_regions]
    return [Region(bbox=b.bbox, kind="text", gt_text=b.gt_text, prompt=TEXT_PROMPT) for b in blocks]


def run_region_batch(model: str, n_pages: int = 2, repeats: int = 2, max_regions: int = 4,
                     decoders=DECODERS, params: DecodeParams | None = None, ar_model: str | None = None,
                     log=print) -> dict:
    """Batch vs one region at a time for each decoder (the AR one with ``ar_model``); see the module doc."""
    params = params or DecodeParams()
    pages = bench_pages(n_pages)
    out: dict = {"model": model, "ar_model": ar_model or model, "pages": n_pages, "repeats": repeats, "max_regions": max_regions,
                 "settings": params.knobs(), "decoders": {}}
    for name in decoders:
        dec = get_decoder(name)
        backend = load_backend(ar_model or model if name == "ar" else model, dec.backend_kind)
        if not (backend.batches_regions or backend.can_batch_regions):
            raise UserInputError(f"{backend.name} cannot decode several regions as one batch")
        rows = []
        for i, page in enumerate(pages):
            regions = page_blocks(page, max_regions)
            runs = {"batch": lambda: dec.run(backend, page, regions, params),
                    "one_at_a_time": lambda: decode_sequential(backend, page, regions, dec.run, params)}
            for run in runs.values():
                run()  # warm-up: new shapes pay one-off costs
            timed = {k: [] for k in runs}
            for r in range(repeats):
                for k in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
                    timed[k].append(runs[k]())
            ids = {k: [[t.id for t in reg.tokens] for reg in v[0].regions] for k, v in timed.items()}
            row = {"page": i, "regions": len(regions), "tokens_equal": ids["batch"] == ids["one_at_a_time"]}
            for k, traces in timed.items():
                m = traces[0].metrics
                row[k] = {"decode_s": statistics.median(t.metrics.decode_s for t in traces),
                          "prefill_s": statistics.median(t.metrics.prefill_s for t in traces),
                          "tokens": m.tokens, "nfe": m.nfe, "batched_forwards": m.batched_forwards}
            rows.append(row)
            log(f"[{name}] page {i}: {len(regions)} regions, batch {row['batch']['decode_s']:.3f}s vs one at a time "
                f"{row['one_at_a_time']['decode_s']:.3f}s, tokens equal: {row['tokens_equal']}")
        seq = sum(r["one_at_a_time"]["decode_s"] for r in rows)
        bat = sum(r["batch"]["decode_s"] for r in rows)
        out["decoders"][name] = {
            "backend": backend.name, "exec_mode": {"batch": "eager", "one_at_a_time": backend.exec_mode},
            "batch_speedup": seq / max(bat, 1e-9),
            "tokens_equal": all(r["tokens_equal"] for r in rows),
            "batched_forwards": {k: sum(r[k]["batched_forwards"] for r in rows) for k in ("batch", "one_at_a_time")},
            "per_page": rows,
        }
    return out
