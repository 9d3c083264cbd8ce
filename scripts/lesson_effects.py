"""What each How-it-works lesson shows on a page, in numbers (docs/app.md's table, decoded live).

    python scripts/lesson_effects.py [--live] [--page assets/samples/courier-short.pdf] [--threads 2]

Prints one markdown row per run of every lesson (mudiff_viz/ui/howitworks.py): forward passes,
tokens per forward, first-step commits, steps per block, order correlation and CER. By default it
reads the shipped recordings (assets/lessons/), as ``scripts/readme_figures.py`` does when it writes
the table into docs/app.md; with --live or another --page it decodes each run instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mudiff_viz.decoding.pipeline import decode_page, make_params  # noqa: E402
from mudiff_viz.decoding.settings import KNOB  # noqa: E402
from mudiff_viz.inputs.pages import load_page  # noqa: E402
from mudiff_viz.ui import howitworks, lesson_docs  # noqa: E402

SAMPLE = ROOT / "assets" / "samples" / "courier-short.pdf"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--page", default=str(SAMPLE))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--live", action="store_true", help="decode every run instead of reading its recording")
    args = ap.parse_args()
    if not args.live and Path(args.page).resolve() == SAMPLE.resolve():
        print(lesson_docs.table(lesson_docs.lesson_traces()))
        return
    import torch

    torch.set_num_threads(args.threads)
    page = load_page(args.page)
    traces = {}
    for lesson in howitworks.LESSONS:
        traces[lesson.key] = []
        for run in lesson.runs:
            knobs = {k: v for k, v in howitworks.run_settings(run).items() if k in KNOB}
            traces[lesson.key].append(decode_page(page, model=run.family, decoder=run.decoder, params=make_params(**knobs)))
    print(lesson_docs.table(traces))


if __name__ == "__main__":
    main()
