"""Child process for :func:`mudiff_viz.pdf.render_pdf_page`: PDF bytes on stdin, JSON + PNG out.

Usage (internal): ``python -m mudiff_viz.pdf_worker PAGE_INDEX DPI < file.pdf``
"""

from __future__ import annotations

import io
import json
import os
import sys

from .errors import UserInputError
from .limits import Limits


def main() -> int:
    page_index, dpi = int(sys.argv[1]), float(sys.argv[2])
    limits = Limits(**json.loads(os.environ.get("MUDIFF_LIMITS_JSON", "{}")))
    data = sys.stdin.buffer.read()
    out = sys.stdout.buffer
    try:
        from .pdf import render_in_process

        rendered = render_in_process(data, page_index, dpi, limits)
    except UserInputError as exc:
        out.write(json.dumps({"error": str(exc)}).encode() + b"\n")
        return 0
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
    out.write(json.dumps(meta).encode() + b"\n")
    out.write(buf.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
