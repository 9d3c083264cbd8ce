"""Record the How-it-works lessons' runs into assets/lessons/ (the app opens each lesson on them).

    python scripts/record_lessons.py [--threads 1] [--out assets/lessons]

Decodes every distinct run of every lesson (mudiff_viz/ui/howitworks.py) on the bundled sample with
the shipped models, as the tab's *Rerun live* does, checks the trace's invariants and writes it
gzipped (ui/lesson_recordings.py names the files). Rerun it whenever the nano weights or a lesson's
runs change: tests/test_lesson_recordings.py fails while a recording differs from a live decode.
Files no lesson uses any more are removed. Into the default folder, it then rewrites the lesson
figures README.md and docs/app.md quote (scripts/readme_figures.py), so they follow the recordings.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="folder (default: assets/lessons)")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    from mudiff_viz.core.trace import check_invariants
    from mudiff_viz.ui import lesson_recordings as rec

    out = Path(args.out) if args.out else rec.LESSONS_DIR
    total, kept = 0, set()
    for run in rec.distinct_runs():
        t0 = time.perf_counter()
        trace = rec.decode_run(run)
        problems = check_invariants(trace)
        if problems:
            print(f"error: {rec.run_key(run)} violates its invariants: {problems[0]}", file=sys.stderr)
            return 1
        size = rec.save_recording(trace, run, out)
        kept.add(rec.recording_path(run, out).name)
        total += size
        m = trace.metrics
        print(f"{rec.run_key(run)}: {trace.clock_length} forwards, {m.tokens_per_forward} tokens/forward, "
              f"CER {100 * (m.cer or 0):.1f}%, {size / 1024:.0f} KB ({time.perf_counter() - t0:.1f} s)", flush=True)
    for stale in out.glob("*.json.gz"):
        if stale.name not in kept:
            stale.unlink()
            print(f"removed {stale.name} (no lesson uses it)")
    print(f"{len(kept)} recordings, {total / 1024:.0f} KB in all -> {out}")
    if out.resolve() == rec.LESSONS_DIR.resolve():
        from mudiff_viz.ui import lesson_docs

        for rel in lesson_docs.stale(write=True):
            print(f"{rel}: lesson figures rewritten from the new recordings")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
