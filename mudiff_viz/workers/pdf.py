"""Child process for the isolated PDF work in :mod:`mudiff_viz.inputs.pdf`: PDF bytes on stdin, one JSON
header line and a binary payload on stdout. Nothing is pickled. A process entry point, like the CLI:
it may call any layer (rendering from inputs, the shuffle from probes).

Usage (internal):
  python -m mudiff_viz.workers.pdf render PAGE_INDEX DPI < file.pdf      -> header + PNG
  python -m mudiff_viz.workers.pdf shuffle LEVEL SEED PAGES RERENDER < file.pdf  -> header + PDF
  python -m mudiff_viz.workers.pdf occlude PAGE_INDEX X0,Y0,X1,Y1,... < file.pdf    -> header + PDF
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sys

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits
from mudiff_viz.inputs.pdf import render_in_process
from mudiff_viz.probes.perturb import redact_rects
from mudiff_viz.probes.shuffle import shuffle_pdf


def render(args: list[str], data: bytes, limits: Limits) -> tuple[dict, bytes]:
    rendered = render_in_process(data, int(args[0]), float(args[1]), limits)
    buf = io.BytesIO()
    rendered.image.save(buf, format="PNG", compress_level=1)
    meta = {
        "page_count": rendered.page_count,
        "dpi": rendered.dpi,
        "lines": [
            {
                "text": ln.text,
                "bbox": list(ln.bbox),
                "chars": [c.c for c in ln.chars],
                "boxes": [list(c.bbox) for c in ln.chars],
                "block": ln.block,
            }
            for ln in rendered.lines
        ],
    }
    return meta, buf.getvalue()


def shuffle(args: list[str], data: bytes, limits: Limits) -> tuple[dict, bytes]:
    pages = None if args[2] == "all" else [int(x) for x in args[2].split(",")]
    result = shuffle_pdf(data, float(args[0]), int(args[1]), pages=pages, rerender=args[3] == "1", limits=limits)
    meta = {"lines": [dataclasses.asdict(r) for r in result.lines], "note": result.note}
    return meta, result.data


def occlude(args: list[str], data: bytes, limits: Limits) -> tuple[dict, bytes]:
    values = [] if args[1] == "-" else [float(v) for v in args[1].split(",")]
    rects = [values[i : i + 4] for i in range(0, len(values), 4)]
    return {}, redact_rects(data, int(args[0]), rects, limits)


TASKS = {"render": render, "shuffle": shuffle, "occlude": occlude}


def main() -> int:
    task, args = sys.argv[1], sys.argv[2:]
    limits = Limits(**json.loads(os.environ.get("MUDIFF_LIMITS_JSON", "{}")))
    data = sys.stdin.buffer.read()
    out = sys.stdout.buffer
    try:
        meta, payload = TASKS[task](args, data, limits)
    except UserInputError as exc:
        out.write(json.dumps({"error": str(exc)}).encode() + b"\n")
        return 0
    out.write(json.dumps({"ok": True, **meta}).encode() + b"\n")
    out.write(payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
