"""``python -m mudiff_viz``: decode pages into traces, inspect traces, shuffle, benchmark.

Errors are one line on stderr. Exit codes: 0 ok, 1 internal failure, 2 bad input, 3 model could
not be loaded.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mudiff_viz.core.errors import ModelLoadError, UserInputError
from mudiff_viz.core.limits import Limits

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT, EXIT_MODEL = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit code 2
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_INPUT)


def add_decode_knobs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="nano", help="nano (default), a checkpoint directory or a hub id")
    p.add_argument("--block-length", type=int, default=32)
    p.add_argument("--steps", type=int, default=32, help="denoising steps per block")
    p.add_argument("--threshold", type=float, default=0.95, help="confidence threshold (dynamic strategy)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = deterministic (argmax); the release uses 1.0")
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument(
        "--strategy",
        default="low_confidence_dynamic",
        choices=["low_confidence_dynamic", "low_confidence_static", "random", "left_to_right"],
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-new-tokens", type=int, default=1024, help="per region")
    p.add_argument("--dpi", type=float, default=150, help="rasterising DPI for PDFs")


def add_limit_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-upload-mb", type=float, help="largest input file (MB)")
    p.add_argument("--max-pages", type=int, help="largest PDF page count")
    p.add_argument("--max-decode-seconds", type=float, help="wall-time limit per decode")


def limits_from(args) -> Limits:
    from mudiff_viz.core.limits import current

    return current(
        max_upload_bytes=int(args.max_upload_mb * 1024 * 1024) if getattr(args, "max_upload_mb", None) else None,
        max_pdf_pages=getattr(args, "max_pages", None),
        max_decode_seconds=getattr(args, "max_decode_seconds", None),
    )


def knobs_from(args) -> dict:
    return {
        "block_length": args.block_length,
        "steps": args.steps,
        "threshold": args.threshold,
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
        "strategy": args.strategy,
        "seed": args.seed,
        "max_new_tokens": args.max_new_tokens,
    }


def summary_line(trace) -> str:
    m = trace.metrics
    parts = [
        f"{trace.decoder}",
        f"model={trace.model.name}",
        f"regions={len(trace.regions)}",
        f"tokens={m.get('tokens')}",
        f"NFE={m.get('nfe')}",
        f"tokens/forward={m.get('tokens_per_forward')}",
        f"wall={m.get('wall_s')}s (prefill {m.get('prefill_s')}s)",
    ]
    if "cer" in m:
        parts.append(f"CER={100 * m['cer']:.2f}%")
    if "truncated" in m:
        parts.append(f"TRUNCATED ({m['truncated']})")
    return " ".join(parts)


def cmd_decode(args) -> int:
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.decoding.pipeline import decode_page, make_params

    limits = limits_from(args)
    page = load_page(args.input, page_index=args.page, dpi=args.dpi, limits=limits)
    params = make_params(limits, **knobs_from(args))
    if args.no_record:
        params.record = False
    trace = decode_page(page, model=args.model, decoder=args.decoder, params=params, mode=args.mode,
                        layout_prompt=args.layout_prompt)
    size = trace.save(args.out)
    if not args.quiet:
        print(trace.text)
    print(summary_line(trace) + f" trace={args.out} ({size / 1e6:.2f} MB)", file=sys.stderr if not args.quiet else sys.stdout)
    return EXIT_OK


def cmd_view(args) -> int:
    from mudiff_viz.core.trace import Trace, check_invariants

    trace = Trace.load(args.trace)
    problems = check_invariants(trace)
    print(summary_line(trace))
    if args.text:
        print(trace.text)
    if problems:
        print(f"warning: {len(problems)} invariant violations, first: {problems[0]}", file=sys.stderr)
    if args.html:
        from mudiff_viz.inputs.page_lookup import page_for_trace
        from mudiff_viz.views.export import standalone_html
        from mudiff_viz.views.page_image import image_data_url

        image = page_for_trace(trace.page)  # the bundled sample it was made on, if it was
        Path(args.html).write_text(standalone_html(trace, image_data_url(image) if image else None), encoding="utf-8")
        print(f"wrote {args.html}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python -m mudiff_viz", description="Look inside diffusion decoding of document OCR.")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    d = sub.add_parser("decode", help="decode a page into a trace")
    d.add_argument("input", help="PNG, JPEG or PDF")
    d.add_argument("--page", type=int, default=0, help="page index (PDF), 0-based")
    d.add_argument("--decoder", choices=["diffusion", "ar"], default="diffusion")
    d.add_argument("--mode", choices=["page", "layout"], default="page",
                   help="page: the model's own regions; layout: layout detection, then recognition per block (MinerU models)")
    d.add_argument("--layout-prompt", choices=["detection", "analysis"], default="detection",
                   help="wording of the layout prompt in --mode layout: 'Layout Detection' (default) or 'Layout Analysis' "
                        "(the release uses both; docs/real-models.md)")
    add_decode_knobs(d)
    add_limit_flags(d)
    d.add_argument("--no-record", action="store_true", help="do not record per-step candidates (faster)")
    d.add_argument("--quiet", action="store_true", help="print only the summary line")
    d.add_argument("--out", required=True, help="trace JSON to write")
    d.set_defaults(func=cmd_decode)

    v = sub.add_parser("view", help="validate a trace and print its summary")
    v.add_argument("trace")
    v.add_argument("--html", help="write a standalone offline HTML replay")
    v.add_argument("--text", action="store_true", help="also print the decoded text")
    v.set_defaults(func=cmd_view)

    for register in _extra_commands():
        register(sub)
    return ap


def _extra_commands():
    """Sub-commands that live in their own modules (shuffle, bench)."""
    from mudiff_viz.bench.speed import register as bench_register
    from mudiff_viz.cli.shuffle import register as shuffle_register

    return [shuffle_register, bench_register]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UserInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except ModelLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_MODEL
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERNAL
    except Exception as exc:  # the last line of defence: one line, never a traceback
        msg = str(exc).splitlines()[0] if str(exc) else ""
        print(f"error: internal failure: {type(exc).__name__}: {msg}", file=sys.stderr)
        if os.environ.get("MUDIFF_DEBUG"):
            raise
        return EXIT_INTERNAL
