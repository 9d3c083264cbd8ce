"""``shuffle`` and ``shuffle-bench`` sub-commands.

    python -m mudiff_viz shuffle INPUT --level P --seed S --out OUT.pdf|OUT.png
    python -m mudiff_viz shuffle-bench INPUT... --levels 0,0.5,1 [--seeds N] [--model SPEC] --out DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mudiff_viz.cli.common import add_knob_flags, add_limit_flags, knobs_from, limits_from
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.page_numbers import page_index


def _level(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"level must be a number in [0, 1], got {text!r}") from None


def register(sub) -> None:
    """Add the two sub-commands to the main parser's sub-parsers."""
    s = sub.add_parser("shuffle", help="Semantic Shuffle a page: permute words within lines, keep the glyphs")
    s.add_argument("input", help="PDF with a text layer, or a PNG/JPEG page (ground truth from INPUT.txt if present)")
    s.add_argument("--level", type=_level, default=1.0, help="fraction of each line's words permuted, in [0, 1]")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--page", type=int, default=1, help="page number (from 1) to write when OUT is a PNG (PDF output keeps all pages)")
    s.add_argument("--dpi", type=float, default=150, help="rasterising DPI for PDF -> PNG")
    s.add_argument("--gt", help="ground-truth text of an image input (default: INPUT with .txt, when it exists)")
    s.add_argument("--out", required=True, help="OUT.pdf (PDF input) or OUT.png; ground truth goes to OUT.txt")
    add_limit_flags(s)
    s.set_defaults(func=cmd_shuffle)

    b = sub.add_parser("shuffle-bench", help="CER of both decoders on original vs shuffled (occluded, degraded) pages")
    b.add_argument("inputs", nargs="+", help="PDFs with a text layer, or images with a sidecar .txt")
    b.add_argument("--levels", default="0,0.25,0.5,1", help="comma-separated shuffle levels (default 0,0.25,0.5,1)")
    b.add_argument("--seeds", type=int, default=3, help="number of seeds (0..N-1)")
    b.add_argument("--model", default="nano", help="one spec for both decoders, or diffusion=SPEC,ar=SPEC")
    b.add_argument("--decoders", default="diffusion,ar", help="comma-separated: diffusion, ar")
    b.add_argument("--page", type=int, default=1, help="page number of PDF inputs, counting from 1")
    b.add_argument("--dpi", type=float, default=150)
    b.add_argument("--occlude", default="0", help="comma-separated occluded word fractions, e.g. 0,0.1,0.2 (default 0)")
    b.add_argument("--degrade", action="append", default=[],
                   help="a degradation to add to the grid, e.g. dpi=72,blur=1 (repeat for several; 'none' is always in)")
    b.add_argument("--out", required=True, help="output directory")
    add_knob_flags(b)
    add_limit_flags(b)
    b.set_defaults(func=cmd_shuffle_bench)


def cmd_shuffle(args) -> int:
    from mudiff_viz.inputs.pages import read_source, sniff_kind
    from mudiff_viz.probes.shuffle import check_level, shuffle_page

    limits = limits_from(args)
    level = check_level(args.level)
    out = Path(args.out)
    suffix = out.suffix.lower()
    if suffix not in (".pdf", ".png"):
        raise UserInputError(f"--out must end in .pdf or .png (lossless), got {out.name!r}")
    data, _ = read_source(args.input, limits)
    kind = sniff_kind(data)
    if kind != "pdf" and suffix == ".pdf":
        raise UserInputError("an image input is shuffled as pixels: write it with --out OUT.png")
    gt_text = None
    if kind != "pdf":
        gt_path = Path(args.gt) if args.gt else Path(args.input).with_suffix(".txt")
        if args.gt and not gt_path.is_file():
            raise UserInputError(f"no such ground-truth file: {gt_path}")
        if gt_path.is_file():
            gt_text = gt_path.read_text(encoding="utf-8", errors="replace")
    if kind == "pdf" and suffix == ".pdf":
        from mudiff_viz.probes.shuffle import shuffle_pdf_isolated

        result = shuffle_pdf_isolated(data, level, args.seed, limits=limits)  # user files: in the worker
        out.write_bytes(result.data)
        gt = None
    else:
        shuffled = shuffle_page(
            data, level, args.seed, page_index=page_index(args.page), dpi=args.dpi, gt_text=gt_text, limits=limits
        )
        result = shuffled.result
        if kind == "pdf":
            shuffled.page.image.save(out, format="PNG")
        else:
            out.write_bytes(result.data)
        gt = shuffled.gt_text
    changed = sum(1 for r in result.lines if r.changed)
    msg = f"shuffled {changed} of {len(result.lines)} lines at level {level:g} (seed {args.seed}) -> {out}"
    if gt is not None:
        gt_out = out.with_suffix(".txt")
        gt_out.write_text(gt + "\n", encoding="utf-8")
        msg += f"; ground truth -> {gt_out}"
    elif kind != "pdf":
        msg += "; ground truth unknown"
    if result.note:
        msg += f" ({result.note})"
    print(msg)
    return 0


def cmd_shuffle_bench(args) -> int:
    from mudiff_viz.probes.bench import (
        bench_pages_from_paths,
        condition_markdown,
        parse_levels,
        run_shuffle_benchmark,
        summary_lines,
        write_outputs,
    )
    from mudiff_viz.probes.perturb import parse_degrade, parse_fractions

    limits = limits_from(args)
    levels = parse_levels(args.levels)
    decoders = [d.strip() for d in args.decoders.split(",") if d.strip()]
    if not decoders or any(d not in ("diffusion", "ar") for d in decoders):
        raise UserInputError(f"--decoders must list diffusion and/or ar, got {args.decoders!r}")
    if args.seeds < 1:
        raise UserInputError(f"--seeds must be >= 1, got {args.seeds}")
    pages = bench_pages_from_paths(args.inputs, page_index=page_index(args.page), limits=limits)

    def progress(done: int, total: int, message: str) -> None:
        print(f"[{done}/{total}] {message}", file=sys.stderr, flush=True)

    occlusions = parse_fractions(args.occlude)
    degradations = [{}] + [parse_degrade(spec) for spec in args.degrade if spec.strip() != "none"]
    result = run_shuffle_benchmark(pages, levels, args.seeds, model=args.model, progress=progress,
                                   decoders=decoders, dpi=args.dpi, limits=limits, occlusions=occlusions,
                                   degradations=degradations, knobs=knobs_from(args))
    paths = write_outputs(result, args.out)
    for line in summary_lines(result.summary):
        print(line)
    if len(result.conditions) > len(result.summary) * len(levels):
        print(condition_markdown(result.conditions))
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return 0
