"""``bench`` and ``sweep``: speed, parallelism and recording cost in one run, and the
accuracy-speed curve (docs/benchmarks.md)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from mudiff_viz.bench.speed import (DECODERS, FULL, QUICK, draft_sweep_table, ratio_text, run_bench, run_draft_sweep, run_sweep,
                                    sweep_figure, sweep_table)
from mudiff_viz.cli.common import add_knob_flags, knobs_from
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.decoding.settings import KNOB, DecodeParams


def register(sub) -> None:
    b = sub.add_parser("bench", help="speed, parallelism and recording-cost benchmark (one run, ratios)")
    b.add_argument("--model", default="nano")
    b.add_argument("--ar-model", help="AR model spec (default: same as --model)")
    b.add_argument("--pages", type=int, default=FULL["n_pages"])
    b.add_argument("--repeats", type=int, default=FULL["repeats"])
    b.add_argument("--quick", action="store_true",
                   help=f"the first {QUICK['n_pages']} pages, {QUICK['repeats']} timed passes (a few minutes on 2 CPU cores)")
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--decoders", default=",".join(DECODERS),
                   help="comma-separated decoders to time beside AR and diffusion (default: all four)")
    b.add_argument("--region-batch", action="store_true",
                   help="instead: a real model's batch regime, several text blocks of a page as one batch vs one at a time")
    b.add_argument("--regions", type=int, default=4, help="with --region-batch: text blocks per page (default 4)")
    b.add_argument("--out", default="bench.json")
    add_knob_flags(b)
    b.set_defaults(func=cmd_bench)
    s = sub.add_parser("sweep", help="accuracy-speed trade-off curve over thresholds and block lengths")
    s.add_argument("--model", default="nano")
    s.add_argument("--ar-model")
    s.add_argument("--pages", type=int, default=6)
    s.add_argument("--thresholds", default="0.5,0.6,0.7,0.8,0.9,0.95,0.99")
    s.add_argument("--block-lengths", default="8,16,32")
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--draft-lengths", help="instead: sweep the draft-and-verify decoders' draft length (e.g. 2,4,8,16)")
    s.add_argument("--one-region-at-a-time", action="store_true", help="with --draft-lengths: the latency regime")
    s.add_argument("--branches", help="with --draft-lengths: self-speculative draft branches to sweep too (e.g. masks,runner-up)")
    s.add_argument("--floors", help="with --draft-lengths: self-speculative draft floors to sweep too (e.g. 0,0.1)")
    s.add_argument("--out", default="docs/results/bench/sweep")
    s.set_defaults(func=cmd_sweep)


def cmd_bench(args) -> int:
    import torch

    torch.set_num_threads(args.threads)
    n, repeats = (QUICK["n_pages"], QUICK["repeats"]) if args.quick else (args.pages, args.repeats)
    t0 = time.perf_counter()
    params = DecodeParams.from_knobs(**knobs_from(args))
    decoders = [d.strip() for d in args.decoders.split(",") if d.strip()]
    unknown = sorted(set(decoders) - set(DECODERS))
    if unknown:
        print(f"error: unknown decoder {unknown[0]!r}: choose from {', '.join(DECODERS)}", file=sys.stderr)
        return 2
    if args.region_batch:
        return _region_batch(args, n, repeats, params, decoders)
    result = run_bench(args.model, n, repeats, ar_model=args.ar_model, params=params, decoders=decoders,
                       log=lambda m: print(m, file=sys.stderr))
    result["threads"] = args.threads
    result["bench_wall_s"] = time.perf_counter() - t0
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    keys = ("tokens_per_forward", "tokens_per_verify_forward", "tokens_equal_ar", "speedup_vs_ar",
            "speedup_vs_ar_page_batch", "recording_overhead", "trace_bytes_per_token", "peak_rss_mb", "cer",
            "decode_s_per_page")
    print(json.dumps({k: result[k] for k in keys}, indent=1))
    for name, stats in result["spreads"].items():
        print(f"{name}: {ratio_text(stats)}")
    for regime, shares in result["recording_share"].items():
        print(f"recording's share of the wall time ({regime}): " + ", ".join(f"{d} {100 * v:.1f}%" for d, v in shares.items()))
    ff = result["first_frame"]
    print(f"first frame after the prefill: median {ff['median_after_prefill_s']:.2f} s, max {ff['max_after_prefill_s']:.2f} s")
    return 0


def _region_batch(args, n: int, repeats: int, params, decoders) -> int:
    from mudiff_viz.bench import region_batch

    if args.decoders == ",".join(DECODERS):  # not named: every decoder whose real backend batches
        decoders = list(region_batch.DECODERS)
    t0 = time.perf_counter()
    result = region_batch.run_region_batch(args.model, n, repeats, args.regions, decoders, params, args.ar_model,
                                           log=lambda m: print(m, file=sys.stderr))
    result["threads"] = args.threads
    result["bench_wall_s"] = time.perf_counter() - t0
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    for name, entry in result["decoders"].items():
        print(f"{name} ({entry['backend']}): batch speedup {entry['batch_speedup']:.2f}x over one region at a time, "
              f"tokens equal: {entry['tokens_equal']}, batched forwards {entry['batched_forwards']}")
    return 0


def cmd_sweep(args) -> int:
    import torch

    torch.set_num_threads(args.threads)
    if args.draft_lengths:
        return _draft_sweep(args)
    thresholds = tuple(float(x) for x in args.thresholds.split(","))
    blocks = tuple(int(x) for x in args.block_lengths.split(","))
    sweep = run_sweep(args.model, args.ar_model, args.pages, thresholds, blocks, log=lambda m: print(m, file=sys.stderr))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.json").write_text(json.dumps(sweep, indent=2) + "\n")
    (out / "sweep.md").write_text(sweep_table(sweep))
    fig = sweep_figure(sweep)
    fig.write_html(out / "sweep.html", include_plotlyjs="cdn")  # small; the PNG is the offline copy
    try:
        fig.write_image(out / "sweep.png", width=900, height=520)
    except Exception as exc:  # kaleido needs a Chromium; the JSON, table and HTML are written anyway
        print(f"note: no PNG ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})", file=sys.stderr)
    print(sweep_table(sweep))
    return 0


def _draft_sweep(args) -> int:
    try:
        lengths = tuple(int(x) for x in args.draft_lengths.split(","))
    except ValueError:
        print(f"error: --draft-lengths must be comma-separated integers, got {args.draft_lengths!r}", file=sys.stderr)
        return 2
    try:
        branches = KNOB["draft_branches"].values(args.branches) if args.branches else None
        floors = KNOB["draft_floor"].values(args.floors) if args.floors else None
    except UserInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sweep = run_draft_sweep(args.model, args.ar_model, args.pages, lengths, one_region_at_a_time=args.one_region_at_a_time,
                            log=lambda m: print(m, file=sys.stderr), branches=branches, floors=floors)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "draft-sweep.json").write_text(json.dumps(sweep, indent=2) + "\n")
    (out / "draft-sweep.md").write_text(draft_sweep_table(sweep))
    print(draft_sweep_table(sweep))
    return 0
