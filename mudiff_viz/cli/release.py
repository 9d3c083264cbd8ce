"""``python -m mudiff_viz import-release``: the MinerU-Diffusion release's own output as a trace.

The input is the JSON a researcher dumps from the release's ``generate`` (tokens, step_map,
step_time; docs/real-models.md#playing-the-releases-own-output). The trace plays with commits only.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mudiff_viz.cli.common import EXIT_OK, summary_line


def register(sub) -> None:
    """Add the ``import-release`` sub-command to the main parser's sub-parsers."""
    r = sub.add_parser("import-release", help="turn the MinerU-Diffusion release's generate output into a trace")
    r.add_argument("output", help="JSON with tokens, step_map and optionally step_time, block_length, threshold, task")
    r.add_argument("--page", required=True, help="the page image the release read (PNG, JPEG, or a PDF's first page)")
    r.add_argument("--tokenizer", required=True, help="the checkpoint folder holding tokenizer.json")
    r.add_argument("--out", required=True, help="where to write the trace (JSON)")
    r.add_argument("--html", help="also write a standalone player (HTML) with the page image")
    r.set_defaults(func=cmd_import_release)


def cmd_import_release(args) -> int:
    from mudiff_viz.decoding.release_import import load_tokenizer, read_release_output, release_trace
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.views.export import standalone_html
    from mudiff_viz.views.page_image import image_data_url

    out = read_release_output(args.output)
    tokenizer = load_tokenizer(args.tokenizer)
    page = load_page(args.page)
    trace = release_trace(out, tokenizer, page)
    size = trace.save(args.out)
    if args.html:
        Path(args.html).write_text(standalone_html(trace, image_data_url(page.image)), encoding="utf-8")
    print(summary_line(trace) + f" trace={args.out} ({size / 1e6:.2f} MB)", file=sys.stderr)
    return EXIT_OK
