"""Peak memory of viewing the worst trace an upload may be: one region whose ground truth fills it.

A trace file may hold up to ``max_trace_bytes``; its bulk can be one region's ``gt_text``, which the
views align against the decoded text. Each measurement runs in a fresh interpreter that reports its
own peak resident memory: the kernel's high-water mark of its address space (``VmHWM``). Not
``ru_maxrss``: Linux carries the forking parent's peak into the child's across ``exec``, so a child of
a 2 GB test worker would report 2 GB.

    python -m mudiff_viz.bench.trace_memory --mb 48 --out docs/results/bench/trace-memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASE_TRACE = ROOT / "assets" / "traces" / "courier-short.diffusion.json"

# The child's own peak in kB, printed last on stderr (peak_memory.py says why not ru_maxrss).
REPORT_PEAK = """
def _report_peak():
    import sys
    from mudiff_viz.core.peak_memory import own_peak_rss_mb
    print("peak_kb", round(own_peak_rss_mb() * 1024), file=sys.stderr)
"""
# The Trace viewer's own handler, as the app calls it, and Gradio's JSON encoding of what it returns.
VIEWER_CHILD = REPORT_PEAK + """
import json, sys
from mudiff_viz.ui.viewer_tab import view_traces
out = list(view_traces([sys.argv[1]], None))[-1]
json.dumps(out, default=str)
_report_peak()
"""
# The CLI's own process: its peak, not that of the PDF render worker it may start (a separate process
# with its own memory cap, hardening.md), which the kernel's count for a waited-for child would include.
VIEW_CHILD = REPORT_PEAK + """
import sys
from mudiff_viz.cli.main import main
rc = main(sys.argv[1:])
_report_peak()
sys.exit(rc)
"""


def write_worst_trace(path: Path, nbytes: int) -> Path:
    """The bundled diffusion trace with its first region's ground truth grown until the file is
    ``nbytes`` long (the page's joined ground truth dropped: it would double the size)."""
    doc = json.loads(BASE_TRACE.read_text(encoding="utf-8"))
    doc["gt_text"] = None
    doc["regions"][0]["gt_text"] = ""
    room = nbytes - len(json.dumps(doc))
    line = "the quick brown fox jumps over the lazy dog "
    doc["regions"][0]["gt_text"] = (line * (room // len(line) + 1))[: max(0, room)]
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def run_child(argv: list[str]) -> tuple[float, int, str]:
    """Run ``argv`` in a child; (its own peak RSS in MB, as it reports it last on stderr, else 0;
    exit code; the rest of stderr)."""
    # a clean environment: what a test run left in os.environ (limits, threads) must not change the measurement
    keep = ("PATH", "HOME", "LANG", "TMPDIR", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PYTHONPATH"] = str(ROOT)
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err, text=True)
        proc.wait()
        err.seek(0)
        lines = err.read().splitlines()
    peak_kb = 0  # a child that died before reporting: no number (the test asserts a positive peak)
    if lines and lines[-1].startswith("peak_kb "):
        peak_kb = int(lines.pop().split()[1])
    return peak_kb / 1024, proc.returncode, "\n".join(lines)


def view_peak(trace: Path) -> tuple[float, int, str]:
    """``python -m mudiff_viz view TRACE --html`` (the summary, the order line, the offline replay)."""
    with tempfile.TemporaryDirectory() as tmp:
        return run_child([sys.executable, "-c", VIEW_CHILD, "view", str(trace), "--html", str(Path(tmp) / "r.html")])


def viewer_peak(trace: Path) -> tuple[float, int, str]:
    """The Trace viewer's handler on ``trace``, its outputs encoded as Gradio sends them."""
    return run_child([sys.executable, "-c", VIEWER_CHILD, str(trace)])


def measure(mb: float, workdir: Path) -> dict:
    trace = write_worst_trace(workdir / "worst.json", int(mb * 1_000_000))
    rows = {}
    for name, fn in (("cli_view", view_peak), ("trace_viewer", viewer_peak)):
        peak, rc, err = fn(trace)
        rows[name] = {"peak_rss_mb": round(peak, 1), "exit": rc, "stderr": err.strip().splitlines()[-3:]}
    return {"trace_bytes": trace.stat().st_size, "gt_chars": len(json.loads(trace.read_text())["regions"][0]["gt_text"]),
            **rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=48.0, help="size of the worst trace in MB (default 48)")
    ap.add_argument("--out", help="write the result as JSON here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(args.mb, Path(tmp))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
