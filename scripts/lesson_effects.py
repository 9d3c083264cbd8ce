"""What each How-it-works lesson shows on the default sample, in numbers (for docs/app.md).

    python scripts/lesson_effects.py [--model nano] [--page assets/samples/courier-short.pdf]

Decodes the page with every lesson's settings (the sixth lesson: the AR twin) and prints one
markdown row per lesson: forward passes, tokens per forward, first-step commits, steps per block,
order correlation and CER, so the docs can say what changes on screen when a lesson's button runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mudiff_viz.core.metrics import first_step_share, mean_steps_per_block, order_correlation  # noqa: E402
from mudiff_viz.decoding.pipeline import decode_page, make_params  # noqa: E402
from mudiff_viz.inputs.pages import load_page  # noqa: E402
from mudiff_viz.ui import howitworks  # noqa: E402


def fmt(v, pct: bool = False) -> str:
    if v is None:
        return "–"
    return f"{100 * v:.1f}%" if pct else f"{v:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="nano")
    ap.add_argument("--page", default=str(ROOT / "assets" / "samples" / "courier-short.pdf"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    page = load_page(args.page)
    print("| lesson | settings | forward passes | tokens / forward | first-step commits | steps / block | "
          "order vs position | CER |")
    print("|---|---|---|---|---|---|---|---|")
    for lesson in howitworks.LESSONS:
        s = howitworks.settings_for(lesson)
        decoder = "ar" if lesson.tab == "compare" else s["decoder"]
        knobs = {k: s[k] for k in ("block_length", "steps", "threshold", "temperature", "strategy")}
        trace = decode_page(page, model=args.model, decoder=decoder, params=make_params(**knobs))
        changed = ", ".join(f"{k} {v}" for k, v in lesson.settings.items()) or ("AR twin" if decoder == "ar" else "defaults")
        m = trace.metrics
        print(f"| {lesson.title} | {changed} | {trace.clock_length} | {fmt(m.tokens_per_forward)} | "
              f"{fmt(first_step_share(trace), pct=True)} | {fmt(None if decoder == 'ar' else mean_steps_per_block(trace))} | "
              f"{fmt(order_correlation(trace))} | {fmt(m.cer, pct=True)} |")


if __name__ == "__main__":
    main()
