"""Decode end to result shown, in a real browser: the app on the shipped nano weights, a long page
(a benchmark page: 40-49 lines, 2,300-3,900 characters), the Decode tab's Run button.

    python scripts/bench_result_latency.py [--decoder diffusion] [--pages 1] [--out latency.json]

It polls the page every 100 ms from the click on and reports, per run:

- ``result_after_decode_s``: when the finished result was on screen, minus the click, minus the
  decode's own wall time (the trace's ``wall_s``): what delivering and drawing the result cost, plus
  what came before the decode (the check, loading the page from the preview's cache, the queue). An
  upper bound on "decode end to result shown"; a first run on the same page loads the model and is
  left out;
- ``result_after_last_frame_s``: the result on screen minus the last streamed frame's arrival: the
  decode ended after that frame, so this is an upper bound on delivering and drawing the result
  that leaves out everything before the decode;
- ``longest_still_s``: the longest stretch before the result in which neither the player's header
  nor the status line changed (the player and the status should move at least once a second), and
  ``longest_still_from_s``, when (after the click) it began;
- ``frames``: how many values the player received.

Numbers go to docs/benchmarks.md; nothing here is a test (tests never time).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

POLL = """() => {
  const m = document.querySelector('#player .mp-mount');
  const head = document.querySelector('#player .mp-header');
  const status = document.querySelector('#decode-status');
  return {loads: m ? +(m.dataset.loads || 0) : 0, kind: m ? m.dataset.kind : null, partial: m ? m.dataset.partial : null,
          tokens: m ? m.querySelectorAll('.token').length : 0, head: head ? head.innerText : '',
          status: status ? status.innerText : ''};
}"""


def long_pages(n: int, folder: Path) -> list[Path]:
    """The benchmark's pages as PDF files (test-split text, never trained on)."""
    from mudiff_viz.inputs import synth

    rng = random.Random(99)
    fonts = list(synth.FONTS)
    out = []
    for i in range(n):
        style = synth.PageStyle(font=fonts[i % 3], size=rng.choice([10.0, 11.0, 12.0]), columns=1, margin=72)
        path = folder / f"long-{i}.pdf"
        path.write_bytes(synth.random_page(rng, "test", style=style).pdf)
        out.append(path)
    return out


def run_once(pg, url: str, pdf: Path, decoder: str) -> dict:
    from tests.ui_support import upload

    pg.goto(url)
    pg.wait_for_selector("#decode-run")
    upload(pg, "decode", pdf)
    pg.locator("#decode-decoder").get_by_label(
        {"diffusion": "Diffusion", "ar": "Autoregressive (AR)"}.get(decoder, decoder), exact=decoder in ("diffusion", "ar")
    ).first.check()
    before = pg.evaluate(POLL)["loads"]
    t0 = time.perf_counter()
    pg.click("#decode-run")
    samples = []
    while True:
        s = pg.evaluate(POLL)
        s["t"] = time.perf_counter() - t0
        samples.append(s)
        if s["loads"] > before and s["kind"] == "mudiff-player" and s["partial"] == "0" and s["tokens"]:
            break
        if s["t"] > 900:
            raise TimeoutError("no result within 900 s")
        pg.wait_for_timeout(100)
    shown = samples[-1]["t"]
    href = pg.eval_on_selector_all("#decode-downloads a", "as => as.map(a => a.href).filter(h => h.includes('.json'))")
    trace = json.loads(urllib.request.urlopen(href[0]).read())
    wall = trace["metrics"]["wall_s"]
    still, still_at, last_change, last_seen = 0.0, 0.0, None, None
    for s in samples[:-1]:  # until the result (its own change ends the last stretch)
        seen = (s["head"], s["status"])
        if last_seen is None or seen != last_seen:
            if last_change is not None and s["t"] - last_change > still:
                still, still_at = s["t"] - last_change, last_change
            last_change, last_seen = s["t"], seen
    streamed = [s["t"] for s in samples if s["loads"] > before and s["partial"] == "1"]
    last_frame = streamed[-1] if streamed else None
    return {"page": pdf.name, "tokens": trace["metrics"]["tokens"], "wall_s": wall, "shown_s": round(shown, 2),
            "result_after_decode_s": round(shown - wall, 2),
            "result_after_last_frame_s": None if last_frame is None else round(shown - last_frame, 2),
            "longest_still_s": round(still, 2), "longest_still_from_s": round(still_at, 2),
            "frames": samples[-1]["loads"] - before}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decoder", default="diffusion")
    ap.add_argument("--pages", type=int, default=1)
    ap.add_argument("--out", default="latency.json")
    args = ap.parse_args(argv)
    import torch

    from models import registry
    from tests.ui_support import launched_app, launched_browser

    torch.set_num_threads(2)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        pdfs = long_pages(args.pages, Path(tmp))
        with launched_app(registry.NANO_DIR) as url, launched_browser() as browser:
            pg = browser.new_page(viewport={"width": 1440, "height": 1000})
            warm = run_once(pg, url, pdfs[0], args.decoder)  # loads the model: not part of any figure
            print(json.dumps({"warm_up": warm}), flush=True)
            for pdf in pdfs:
                row = run_once(pg, url, pdf, args.decoder)
                print(json.dumps(row), flush=True)
                rows.append(row)
    Path(args.out).write_text(json.dumps({"model": "nano", "decoder": args.decoder, "runs": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
