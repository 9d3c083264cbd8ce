"""``corpus run`` and ``corpus stats``: many pages into a Parquet trace store, and its aggregates.

    python -m mudiff_viz corpus run INPUTS... --out DIR [--decoders diffusion,ar,self-speculative,speculative] [--model SPEC]
        [--levels 0,1] [--occlude 0,0.1] [--degrade SPEC ...] [--seeds N] [--workers N] [--ray auto|ADDRESS]
    python -m mudiff_viz corpus stats DIR [--out REPORT_DIR] [--run RUN_ID]

docs/corpus.md has the schema, the cluster set-up and the measured throughput.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mudiff_viz.cli.common import EXIT_OK, OneLineParser, add_knob_flags, add_limit_flags, knobs_from, limits_from
from mudiff_viz.core.errors import UserInputError


def register(sub) -> None:
    c = sub.add_parser("corpus", help="decode many pages into a Parquet trace store; aggregate it")
    csub = c.add_subparsers(dest="corpus_cmd", required=True, parser_class=OneLineParser)

    r = csub.add_parser("run", help="decode every page x probe variant x decoder into the store (resumable)")
    r.add_argument("inputs", nargs="+", help="PDFs (file.pdf or file.pdf:1-3,7, pages from 1), images with a sidecar "
                                             "<stem>.txt, or folders of them")
    r.add_argument("--out", required=True, help="the store's folder (created; a rerun resumes it)")
    r.add_argument("--decoders", default="diffusion,ar",
                   help="comma-separated: diffusion, ar, self-speculative, speculative")
    r.add_argument("--model", default="nano", help="one spec for every decoder, or diffusion=SPEC,ar=SPEC")
    r.add_argument("--levels", default="0", help="Semantic Shuffle levels, e.g. 0,0.5,1 (default 0)")
    r.add_argument("--occlude", default="0", help="occluded word fractions, e.g. 0,0.1 (default 0)")
    r.add_argument("--degrade", action="append", default=[], metavar="SPEC",
                   help="a degradation to add to the grid, e.g. dpi=72,blur=1 (repeat for several; none is always in)")
    r.add_argument("--seeds", type=int, default=1, help="probe seeds 0..N-1 (default 1)")
    r.add_argument("--dpi", type=float, default=150, help="rasterising DPI for PDFs")
    r.add_argument("--ray", metavar="auto|local|ADDRESS",
                   help="decode on Ray: auto (the cluster on this machine, else a local instance), local, or an "
                        "address such as 10.0.0.1:6379 or ray://head:10001; without it, in this process")
    r.add_argument("--workers", type=int, help="Ray actors (default: one per GPU, else one per --threads CPUs)")
    r.add_argument("--threads", type=int, default=1, help="intra-op threads per worker (part of the run's settings)")
    r.add_argument("--chunk-pages", type=int, default=32, help="pages per Parquet part file")
    r.add_argument("--retry-failed", action="store_true", help="decode the run's failed pages again")
    add_knob_flags(r)
    add_limit_flags(r)
    r.set_defaults(func=cmd_run)

    s = csub.add_parser("stats", help="aggregates of a store (DuckDB): markdown tables and plotly HTML")
    s.add_argument("store", help="the store's folder")
    s.add_argument("--out", help="report folder (default: STORE/stats)")
    s.add_argument("--run", help="one run id (default: every run in the store, pooled)")
    s.set_defaults(func=cmd_stats)


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def cmd_run(args) -> int:
    from mudiff_viz.corpus.grid import ProbeGrid
    from mudiff_viz.corpus.progress import ProgressBar
    from mudiff_viz.corpus.runner import run_corpus
    from mudiff_viz.probes.bench import parse_levels
    from mudiff_viz.probes.perturb import parse_fractions

    if args.seeds < 1:
        raise UserInputError(f"--seeds must be >= 1, got {args.seeds}")
    grid = ProbeGrid.build(levels=parse_levels(args.levels), occlusions=parse_fractions(args.occlude),
                           degradations=args.degrade, seeds=args.seeds)
    bar = ProgressBar()
    try:
        summary = run_corpus(args.inputs, args.out, decoders=_names(args.decoders), models=args.model,
                             knobs=knobs_from(args), grid=grid, workers=args.workers, ray_address=args.ray,
                             progress=bar, dpi=args.dpi, threads=args.threads, limits=limits_from(args),
                             chunk_pages=args.chunk_pages, retry_failed=args.retry_failed)
    finally:
        bar.close()
    print(summary.line())
    return EXIT_OK


def cmd_stats(args) -> int:
    from mudiff_viz.corpus.report import write_report

    out = Path(args.out) if args.out else Path(args.store) / "stats"
    paths = write_report(args.store, out, run_id=args.run)
    print(paths["report.md"].read_text(encoding="utf-8"))
    print(f"wrote {', '.join(str(p) for p in paths.values())}", file=sys.stderr)
    return EXIT_OK
