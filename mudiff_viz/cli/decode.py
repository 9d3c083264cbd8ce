"""``decode`` and ``view``: a page into a trace, and a trace checked, summarised or exported.

Each command imports its machinery when it runs, so ``view`` starts without torch.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mudiff_viz.cli.common import (
    EXIT_OK,
    add_knob_flags,
    add_limit_flags,
    knobs_from,
    limits_from,
    order_line,
    summary_line,
)
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.decoding.decoders import DECODERS


def register(sub) -> None:
    d = sub.add_parser("decode", help="decode a page into a trace")
    d.add_argument("input", help="PNG, JPEG or PDF")
    d.add_argument("--page", type=int, default=1, help="page number (PDF), counting from 1 as the app does")
    d.add_argument("--decoder", choices=list(DECODERS), default="diffusion")
    d.add_argument("--model", default="nano", help="nano (default: the character pair), nano-char, nano-subword, a checkpoint directory or a hub id")
    d.add_argument("--layout-prompt", choices=["detection", "analysis"], default="detection",
                   help="wording of the layout prompt in --mode layout: 'Layout Detection' (default) or 'Layout Analysis' "
                        "(the release uses both; docs/real-models.md)")
    d.add_argument("--dpi", type=float, default=150, help="rasterising DPI for PDFs")
    d.add_argument("--occlude", type=float, metavar="FRACTION",
                   help="blank this fraction of the page's words (seeded by --probe-seed; PDFs: the words are redacted)")
    d.add_argument("--occlude-words", metavar="I,J,...", help="blank these words (indices in reading order)")
    d.add_argument("--degrade", metavar="SPEC", help="a worse scan: dpi=72,blur=1,noise=8,jpeg=30,rotate=1.5 (any of them)")
    d.add_argument("--probe-seed", type=int, default=0, help="seed of --occlude and --degrade")
    add_knob_flags(d)
    add_limit_flags(d)
    d.add_argument("--batch-regions", action="store_true",
                   help="a real model: its regions (--mode layout: the detected blocks) as batches, not one at a time")
    d.add_argument("--no-record", action="store_true", help="do not record per-step candidates (faster)")
    d.add_argument("--fused", action="store_true",
                   help="diffusion: no host round trip per denoising step (same result; one CUDA graph per step on GPUs)")
    d.add_argument("--quiet", action="store_true", help="print only the summary line")
    d.add_argument("--out", required=True, help="trace JSON to write")
    d.add_argument("--document", metavar="PATH", help="--mode layout: also write the page as one document (tables as "
                   "HTML, equations in \\[ \\], by the layout rules; docs/real-models.md#the-page-document)")
    d.set_defaults(func=cmd_decode)

    v = sub.add_parser("view", help="validate a trace and print its summary")
    v.add_argument("trace")
    v.add_argument("--html", help="write a standalone offline HTML replay")
    v.add_argument("--text", action="store_true", help="also print the decoded text")
    v.add_argument("--gif", metavar="OUT.gif", help="write the decode as an animated GIF (page, overlay, text)")
    v.add_argument("--mp4", metavar="OUT.mp4", help="write the decode as an MP4 video (needs pip install -e '.[video]')")
    v.add_argument("--width", type=int, default=960, help="animation width in pixels (default 960)")
    v.add_argument("--fps", type=float, default=6.0, help="animation frames a second (default 6)")
    v.add_argument("--clock", choices=("forward", "wall"), default="forward",
                   help="animation frames: one per forward pass, or evenly spaced in wall time")
    v.add_argument("--max-frames", type=int, default=300, help="a longer decode shows every k-th forward (default 300)")
    v.set_defaults(func=cmd_view)


def cmd_decode(args) -> int:
    from mudiff_viz.notebook.api import decode  # the public API's decode: one code path (docs/notebook.md)

    knobs = knobs_from(args)  # --mode and --task are knobs (decoding/settings.py)
    if args.document and knobs["mode"] != "layout":
        raise UserInputError("--document needs --mode layout")

    trace = decode(args.input, model=args.model, decoder=args.decoder, page=args.page, dpi=args.dpi,
                   layout_prompt=args.layout_prompt, occlude=args.occlude_words or args.occlude, degrade=args.degrade,
                   probe_seed=args.probe_seed, record=not args.no_record, fused=args.fused, limits=limits_from(args),
                   batch_regions=True if args.batch_regions else None, **knobs)
    size = trace.save(args.out)
    if args.document:
        from models.mineru_common.content import trace_document

        Path(args.document).write_text(trace_document(trace), encoding="utf-8")
    if not args.quiet:
        print(trace.text)
    print(summary_line(trace) + f" trace={args.out} ({size / 1e6:.2f} MB)", file=sys.stderr if not args.quiet else sys.stdout)
    return EXIT_OK


def cmd_view(args) -> int:
    from mudiff_viz.core.trace import Trace, check_invariants
    from mudiff_viz.probes.replay import page_for_trace
    from mudiff_viz.views.export import standalone_html
    from mudiff_viz.views.page_image import image_data_url
    from mudiff_viz.views.warnings import alignment_notes

    opts = None
    if args.gif or args.mp4:  # options checked before any work: a bad one is one line and nothing written
        from mudiff_viz.views.animation import AnimationOptions

        opts = AnimationOptions(width=args.width, fps=args.fps, clock=args.clock, max_frames=args.max_frames)
        opts.check()
    trace = Trace.load(args.trace)
    problems = check_invariants(trace)
    print(summary_line(trace))
    order = order_line(trace)
    if order:
        print(order)
    if args.text:
        print(trace.text)
    for note in alignment_notes(trace):
        print(f"note: {note}", file=sys.stderr)
    if problems:
        print(f"warning: {len(problems)} invariant violations, first: {problems[0]}", file=sys.stderr)
    image = page_for_trace(trace.page) if (args.html or args.gif or args.mp4) else None  # its bundled sample, if any
    if args.html:
        Path(args.html).write_text(standalone_html(trace, image_data_url(image) if image else None), encoding="utf-8")
        print(f"wrote {args.html}")
    if opts is not None:
        from mudiff_viz.views.animation import save_gif, save_mp4

        for out, save in ((args.gif, save_gif), (args.mp4, save_mp4)):
            if out:
                size = save(trace, out, image, opts)
                print(f"wrote {out} ({size / 1e6:.2f} MB)")
    return EXIT_OK
