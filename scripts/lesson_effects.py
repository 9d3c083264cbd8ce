"""What each How-it-works lesson shows on the default sample, in numbers (for docs/app.md).

    python scripts/lesson_effects.py [--live] [--page assets/samples/courier-short.pdf] [--threads 2]

Reads every lesson's shipped recording (assets/lessons/, scripts/record_lessons.py; with --live or
another --page: decodes each run of every lesson, mudiff_viz/ui/howitworks.py) and prints one
markdown row per run: forward passes, tokens per forward, first-step commits, steps
per block, order correlation and CER, so docs/app.md can say what each lesson shows on screen.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mudiff_viz.core.metrics import first_step_share, mean_steps_per_block, order_correlation  # noqa: E402
from mudiff_viz.decoding.pipeline import decode_page, make_params  # noqa: E402
from mudiff_viz.decoding.settings import KNOB  # noqa: E402
from mudiff_viz.inputs.pages import load_page  # noqa: E402
from mudiff_viz.ui import howitworks  # noqa: E402


def fmt(v, pct: bool = False) -> str:
    if v is None:
        return "–"
    return f"{100 * v:.1f}%" if pct else f"{v:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--page", default=str(ROOT / "assets" / "samples" / "courier-short.pdf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--live", action="store_true", help="decode every run instead of reading its recording")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from mudiff_viz.ui import lesson_recordings

    default_page = Path(args.page).resolve() == (ROOT / "assets" / "samples" / "courier-short.pdf").resolve()
    page = load_page(args.page)
    print("| lesson | pane | pair | decoder | strategy | settings | forward passes | tokens / forward | "
          "first-step commits | steps / block | order vs position | CER |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for lesson in howitworks.LESSONS:
        for run in lesson.runs:
            s = howitworks.run_settings(run)
            knobs = {k: v for k, v in s.items() if k in KNOB}
            trace = None if args.live or not default_page else lesson_recordings.load_recording(run)
            if trace is None:
                trace = decode_page(page, model=run.family, decoder=run.decoder, params=make_params(**knobs))
            diffusion = run.decoder == "diffusion"
            changed = ", ".join(f"{k} {v}" for k, v in run.settings.items() if k != "strategy") or "defaults"
            m = trace.metrics
            print(f"| {lesson.title} | {howitworks.run_label(run)} | {howitworks.PAIR_NAMES[run.family]} | "
                  f"{run.decoder} | {s['strategy'] if diffusion else '–'} | {changed if diffusion else '–'} | "
                  f"{trace.clock_length} | {fmt(m.tokens_per_forward)} | "
                  f"{fmt(first_step_share(trace) if diffusion else None, pct=True)} | "
                  f"{fmt(mean_steps_per_block(trace) if diffusion else None)} | "
                  f"{fmt(order_correlation(trace))} | {fmt(m.cer, pct=True)} |", flush=True)


if __name__ == "__main__":
    main()
