"""``loadtest``: many concurrent visitors on the app, every answer checked against a solo run
(docs/reliability.md; the logic is :mod:`mudiff_viz.bench.loadtest`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mudiff_viz.cli.common import EXIT_INTERNAL, EXIT_OK
from mudiff_viz.core.errors import UserInputError


def register(sub) -> None:
    lt = sub.add_parser("loadtest", help="N concurrent gradio_client visitors on the app; answers checked against solo runs")
    lt.add_argument("--clients", type=int, default=8)
    lt.add_argument("--decodes", type=int, default=25, help="decodes per client")
    lt.add_argument("--pages", type=int, default=3, help="distinct pages per client")
    lt.add_argument("--max-tokens", type=int, default=24, help="max new tokens per region of every decode")
    lt.add_argument("--models", help="folder of nano weights for the started app (default: the shipped ones)")
    lt.add_argument("--settle-s", type=float, default=60.0, help="how long to wait for RSS to come back")
    lt.add_argument("--out", default="loadtest.json")
    lt.set_defaults(func=cmd_loadtest)


def cmd_loadtest(args) -> int:
    from mudiff_viz.bench.loadtest import run_load, start_server

    if args.clients < 1 or args.decodes < 1 or args.pages < 1:
        raise UserInputError("--clients, --decodes and --pages must be at least 1")
    proc, url = start_server(args.models)
    try:
        report = run_load(url, proc.pid, args.clients, args.decodes, args.pages, args.max_tokens, args.settle_s)
    finally:
        proc.kill()
        proc.wait()
    out = {**report.summary(), "errors_first": report.errors[:5], "mismatches_first": report.mismatches[:5],
           "rss_timeline_mb": report.timeline}
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(json.dumps(report.summary()))
    ok = not report.errors and not report.mismatches and report.rss_returned
    if not ok:
        print(f"error: {len(report.errors)} errors, {len(report.mismatches)} mismatches, RSS "
              f"{report.rss_after_mb:.0f} MB after vs {report.rss_warm_mb:.0f} MB warm", file=sys.stderr)
    return EXIT_OK if ok else EXIT_INTERNAL
