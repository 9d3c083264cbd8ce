"""The page image of a corpus trace: the same variant (shuffled, occluded, degraded) rebuilt from its
source file, so the corpus player shows the page that was decoded, not a blank box.

A store's trace records its source path and its page id (``<sha256 prefix>/p<n>/<variant label>``);
the source is read only from the folders the Corpus tab may read, and only if its bytes still hash to
the recorded prefix. Anything else gives no image (never an error: the trace still plays).
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from mudiff_viz.core.limits import current as current_limits
from mudiff_viz.core.trace import Trace
from mudiff_viz.corpus.grid import Variant, make_variant
from mudiff_viz.probes.replay import file_sha256, page_for_trace


def parse_variant(label: str) -> Variant | None:
    """``shuffle=0.5;occlude=0;degrade=none;seed=0`` -> Variant (None when it does not parse)."""
    try:
        kv = dict(part.split("=", 1) for part in label.split(";"))
        return Variant(float(kv["shuffle"]), float(kv["occlude"]), kv["degrade"], int(kv["seed"]))
    except (KeyError, ValueError):
        return None


def source_file(source: str | None, roots: list[Path], repo: Path) -> Path | None:
    if not source:
        return None
    path = Path(source)
    path = (path if path.is_absolute() else repo / path).resolve()
    if not path.is_file() or not any(r == path or r in path.parents for r in roots):
        return None
    return path


def corpus_page_image(trace: Trace, page_id: str, roots: list[Path], repo: Path) -> Image.Image | None:
    """The decoded page's image: a bundled sample's (with its probes), else the variant rebuilt."""
    image = page_for_trace(trace.page)
    if image is not None:
        return image
    parts = page_id.split("/", 2)
    variant = parse_variant(parts[2]) if len(parts) == 3 else None
    path = source_file(trace.page.source, roots, repo)
    if variant is None or path is None or not file_sha256(path).startswith(parts[0]):
        return None
    try:
        page = make_variant(path.read_bytes(), path.name, trace.page.page_index, variant, float(trace.page.dpi or 150),
                            None, current_limits()).page
    except Exception:  # a source that no longer renders: the trace plays without its page
        return None
    if (page.width, page.height) != (trace.page.width, trace.page.height):
        return None  # rendered differently: the boxes would not line up
    return page.image
