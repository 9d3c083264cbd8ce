"""Regenerate the example traces bundled in assets/traces/ (replayed by the app with no model).

    python scripts/make_example_traces.py                       # the embedded nano pair
    python scripts/make_example_traces.py --model-ar runs/nano-ar --model-diffusion runs/nano-diffusion

Writes ``<page>.diffusion.json`` and ``<page>.ar.json`` for the page (default: the short Courier
sample), checks their invariants and prints one summary line each. Rerun it whenever the nano
weights change; the app, the trace viewer and the browser tests pick the files up by name.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--page", default=str(ROOT / "assets" / "samples" / "courier-short.pdf"))
    ap.add_argument("--model-diffusion", default="nano")
    ap.add_argument("--model-ar", default="nano")
    ap.add_argument("--out", default=str(ROOT / "assets" / "traces"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=1024)
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    from mudiff_viz.cli.common import summary_line
    from mudiff_viz.core.trace import check_invariants
    from mudiff_viz.decoding.pipeline import decode_page, make_params
    from mudiff_viz.inputs.pages import load_page

    page = load_page(args.page)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(args.page).stem
    for decoder, spec in (("ar", args.model_ar), ("diffusion", args.model_diffusion)):
        params = make_params(max_new_tokens=args.max_new_tokens)
        trace = decode_page(page, model=spec, decoder=decoder, params=params)
        problems = check_invariants(trace)
        if problems:
            print(f"error: {decoder} trace violates its invariants: {problems[0]}", file=sys.stderr)
            return 1
        path = out / f"{stem}.{decoder}.json"
        size = trace.save(path)
        print(f"{summary_line(trace)} -> {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} ({size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
