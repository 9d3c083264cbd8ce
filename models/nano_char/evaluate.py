"""Evaluate the nano twins on held-out synthetic pages (text never used in training).

    python -m models.nano.evaluate --pages-per-font 4 --out docs/nano-eval.json

Pages: test-split text, 150 DPI, Helvetica / Times / Courier at 10-12 pt, clean renders, one or two
columns; plus pages in DejaVu Serif (a font never seen in training; reported, not targeted). Page
CER is micro-averaged (total edits / total ground-truth characters) over the decoded text of all
text-layer lines, joined by newlines.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path

import torch

from mudiff_viz.inputs import synth
from mudiff_viz.decoding.settings import DecodeParams
from mudiff_viz.core.metrics import cer
from mudiff_viz.inputs.pages import Page
from mudiff_viz.decoding.pipeline import decode_page

THRESHOLDS = (0.5, 0.75, 0.9, 0.95, 0.99)
DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"


def eval_pages(pages_per_font: int, seed: int = 2024, fonts=tuple(synth.FONTS)) -> list[tuple[str, Page]]:
    """Held-out pages: (label, rendered page) for each Base-14 family at 10-12 pt, 150 DPI."""
    rng = random.Random(seed)
    out = []
    for font in fonts:
        for i in range(pages_per_font):
            style = synth.PageStyle(font=font, size=rng.choice([10.0, 11.0, 12.0]), columns=rng.choice([1, 1, 2]),
                                    margin=rng.uniform(54, 80), heading=rng.random() < 0.7)
            out.append((f"{font}-{i}", synth.random_page(rng, "test", style=style).render(150)))
    return out


def dejavu_pages(n: int, seed: int = 77) -> list[tuple[str, Page]]:
    if not os.path.exists(DEJAVU):
        return []
    rng = random.Random(seed)
    docs = synth.documents("test")
    out = []
    for i in range(n):
        doc = rng.choice(docs)
        pars = list(doc.paragraphs)
        while sum(map(len, pars)) < 4000:
            pars += rng.choice(docs).paragraphs
        sp = synth.make_page(pars, synth.PageStyle(size=11.0), heading="DejaVu Serif", font_file=DEJAVU)
        out.append((f"dejavu-{i}", sp.render(150)))
    return out


def run(model_ar: str, model_diff: str, pages, thresholds=THRESHOLDS, block_length: int = 32) -> list[dict]:
    """One row per (page, setting): edits, characters, tokens, NFE and decode time."""
    rows = []
    for decoder, thr in [("ar", None)] + [("diffusion", t) for t in thresholds]:
        for label, page in pages:
            if decoder == "ar":
                params = DecodeParams(max_new_tokens=320)
            else:
                params = DecodeParams(block_length=block_length, steps=block_length, threshold=thr, max_new_tokens=320)
            t0 = time.perf_counter()
            trace = decode_page(page, model=model_ar if decoder == "ar" else model_diff, decoder=decoder, params=params)
            elapsed = time.perf_counter() - t0
            ref = page.text
            rows.append({
                "page": label, "setting": "ar" if decoder == "ar" else f"diffusion@{thr}",
                "edits": round(cer(trace.text, ref) * len(ref)), "chars": len(ref),
                "tokens": trace.metrics["tokens"], "nfe": trace.metrics["nfe"], "seconds": elapsed,
                "decode_s": trace.metrics["decode_s"],
            })
        print(rows[-1]["setting"], json.dumps(summarize(rows, rows[-1]["setting"])), flush=True)
    return rows


def summarize(rows: list[dict], setting: str, prefix: str = "") -> dict:
    sel = [r for r in rows if r["setting"] == setting and r["page"].startswith(prefix)]
    chars = sum(r["chars"] for r in sel)
    return {
        "cer": sum(r["edits"] for r in sel) / max(1, chars),
        "page_cer_max": max(r["edits"] / r["chars"] for r in sel),
        "tokens_per_forward": sum(r["tokens"] for r in sel) / max(1, sum(r["nfe"] for r in sel)),
        "seconds_per_page_median": statistics.median(r["seconds"] for r in sel),
        "chars_per_page_mean": chars / len(sel),
        "pages": len(sel),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m models.nano.evaluate")
    ap.add_argument("--ar", default="nano-ar", help="AR model spec")
    ap.add_argument("--diffusion", default="nano-diffusion", help="diffusion model spec")
    ap.add_argument("--pages-per-font", type=int, default=4)
    ap.add_argument("--dejavu-pages", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("docs/nano-eval.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = run(args.ar, args.diffusion, eval_pages(args.pages_per_font))
    settings = list(dict.fromkeys(r["setting"] for r in rows))
    report = {
        "base14": {s: summarize(rows, s) for s in settings},
        "per_font": {f: {s: summarize(rows, s, f) for s in ("ar", "diffusion@0.95")} for f in synth.FONTS},
    }
    dv = dejavu_pages(args.dejavu_pages)
    if dv:
        dv_rows = run(args.ar, args.diffusion, dv, thresholds=(0.95,))
        report["dejavu_serif_unseen_font"] = {s: summarize(dv_rows, s) for s in ("ar", "diffusion@0.95")}
        rows += dv_rows
    report["setup"] = {"dpi": 150, "pages_per_font": args.pages_per_font, "threads": args.threads,
                       "block_length": 32, "steps": 32, "temperature": 0.0}
    report["rows"] = rows
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
