"""App cold start: seconds from a fresh interpreter to a built app (imports + build_app), the
median of N fresh processes, and which heavy packages that start imported.

    python scripts/cold_start.py [--runs 5] [--without pyarrow,duckdb,ray,anywidget]

``--without`` makes those packages unimportable (as in an install without the extras) without
uninstalling them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE = r"""
import json, sys, time
for m in WITHOUT: sys.modules[m] = None
t0 = time.perf_counter()
from mudiff_viz.ui.app import build_app
t1 = time.perf_counter()
build_app()
t2 = time.perf_counter()
heavy = sorted(m for m in ("ray", "duckdb", "pyarrow", "pandas", "anywidget") if sys.modules.get(m))
print(json.dumps({"import_s": t1 - t0, "build_s": t2 - t1, "total_s": t2 - t0, "heavy_imported": heavy}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--without", default="", help="comma-separated packages to make unimportable")
    args = ap.parse_args()
    without = [m for m in args.without.split(",") if m]
    probe = PROBE.replace("WITHOUT", repr(without))
    runs = []
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True,
                             env={"GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {k: round(statistics.median(r[k] for r in runs), 2) for k in ("import_s", "build_s", "total_s")}
    print(json.dumps({"runs": args.runs, "without": without, **med, "heavy_imported": runs[-1]["heavy_imported"]}))


if __name__ == "__main__":
    main()
