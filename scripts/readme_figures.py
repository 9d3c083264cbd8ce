"""Rewrite the lesson figures README.md and docs/app.md quote from the shipped recordings.

    python scripts/readme_figures.py [--check]

Each block sits between marker comments (mudiff_viz/ui/lesson_docs.py names them); the figures come
from assets/lessons/ (scripts/record_lessons.py), as the app shows them. Rerun it after recording
the lessons again. ``--check`` writes nothing and exits 1 when a block differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only say which files differ (exit 1 if any)")
    args = ap.parse_args(argv)
    from mudiff_viz.ui import lesson_docs

    try:
        changed = lesson_docs.stale(write=not args.check)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for rel in changed:
        print(f"{rel}: {'differs from the recordings' if args.check else 'rewritten'}")
    if not changed:
        print("every lesson figure equals the recordings")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
