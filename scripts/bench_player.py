"""How fast does the player update when scrubbing? Measured in headless Chromium.

    python scripts/bench_player.py                    # a synthetic 2,240-token page (see below)
    python scripts/bench_player.py --trace t.json     # any saved trace

Without --trace, the page helvetica-page.pdf (35 text lines) is decoded by random-weight nano twins
whose answers are capped at 64 tokens: they never stop early, so all 35 lines are decoding at every
forward (2 blocks of 32 positions, 32 steps each): 2,240 tokens and ~37,000 recorded guesses, a
worst case for the player (every line changes at every step). The model's quality is irrelevant here.

The trace is written as the standalone offline replay (the same player code as the app), opened in
Chromium, and timed there:
- sequential: seek to frames 0, 1, ..., N (the Play button and the arrow keys do this)
- random: seek to random frames (dragging the scrubber far)
Each update is timed to the end of style recalculation and layout (a forced synchronous layout), and
separately as the time between animation frames with a seek in each (includes paint).
Prints a JSON summary; the figures in docs/app.md come from this script.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]

MEASURE_JS = """
async ([mode, reps]) => {
  const pl = document.getElementById('player').__mudiffPlayer;
  const N = pl.maxFrame();
  let frames = [];
  if (mode === 'sequential') { for (let r = 0; r < reps; r++) for (let s = 0; s <= N; s++) frames.push(s); }
  else { let x = 12345; for (let i = 0; i < reps * (N + 1); i++) { x = (x * 1103515245 + 12345) % 2147483648; frames.push(x % (N + 1)); } }
  const sync = [];
  for (const s of frames) {
    const t0 = performance.now();
    pl.seekFrame(s);
    void document.body.offsetHeight;  // force style + layout
    sync.push(performance.now() - t0);
  }
  // frame-to-frame: one seek per animation frame, paint included
  const raf = [];
  await new Promise((resolve) => {
    let i = 0, last = performance.now();
    const tick = (now) => {
      if (i > 0) raf.push(now - last);
      last = now;
      if (i >= Math.min(frames.length, 400)) { resolve(); return; }
      pl.seekFrame(frames[i++]);
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  return {N, sync, raf, tokens: document.querySelectorAll('#player .token').length,
          entries: pl.models[0].eslot.length};
}
"""


def synthetic_trace(tmp: Path):
    import torch

    from models import registry
    from models.nano.model import NanoConfig
    from models.nano_char.model import NanoOCR
    from models.nano_char.weights import save_model
    from mudiff_viz.decoding.pipeline import decode_page, make_params
    from mudiff_viz.inputs.pages import load_page

    torch.manual_seed(0)
    torch.set_num_threads(1)
    cfg = NanoConfig.character(kind="diffusion", d_model=64, n_layers=1, n_heads=2, mlp_hidden=128, enc_dim=64, enc_layers=1,
                     conv_channels=(8, 16, 16, 16), max_answer=64)
    save_model(NanoOCR(cfg), tmp / "nano-diffusion")
    registry.NANO_DIR = tmp
    page = load_page(ROOT / "assets" / "samples" / "helvetica-page.pdf")
    params = make_params(block_length=32, steps=32, threshold=0.95, max_new_tokens=64)
    return decode_page(page, model="nano", decoder="diffusion", params=params)


def summarise(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {
        "median_ms": round(statistics.median(xs), 2),
        "p95_ms": round(xs[int(0.95 * (len(xs) - 1))], 2),
        "max_ms": round(xs[-1], 2),
        "n": len(xs),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", help="a saved trace (default: the synthetic 2,240-token page)")
    ap.add_argument("--reps", type=int, default=2, help="passes over all frames")
    ap.add_argument("--width", type=int, default=1440)
    args = ap.parse_args(argv)
    if not os.path.exists(CHROMIUM):
        print(f"error: {CHROMIUM} not found (apt-get install chromium)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    from mudiff_viz.core.trace import Trace
    from mudiff_viz.views.export import standalone_html
    from mudiff_viz.views.player import player_payload

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trace = Trace.load(args.trace) if args.trace else synthetic_trace(tmp)
        payload_bytes = len(json.dumps(player_payload(trace), separators=(",", ":")).encode())
        html_path = tmp / "replay.html"
        html_path.write_text(standalone_html(trace), encoding="utf-8")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": args.width, "height": 1000})
            t0 = time.perf_counter()
            page.goto(html_path.as_uri())
            page.wait_for_selector("#player .token")
            load_s = time.perf_counter() - t0
            results = {}
            for mode in ("sequential", "random"):
                r = page.evaluate(MEASURE_JS, [mode, args.reps])
                results[mode] = {"update_and_layout": summarise(r["sync"]), "frame_to_frame_with_paint": summarise(r["raf"])}
            browser.close()
    out = {
        "trace": args.trace or "synthetic: helvetica-page.pdf, 35 lines x 64 tokens, random nano twin",
        "tokens": trace.n_tokens,
        "frames": r["N"] + 1,
        "recorded_guesses": r["entries"],
        "payload_bytes": payload_bytes,
        "open_and_first_render_s": round(load_s, 2),
        **results,
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
