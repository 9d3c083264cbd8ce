"""Evaluate an embedded pair on held-out synthetic pages (text never used in training).

    python -m nano_training.evaluate --pair nano-subword --out docs/results/nano-eval/nano-subword-eval.json
    python -m nano_training.evaluate --pair nano-char --out docs/results/nano-eval/nano-char-eval.json
    python -m nano_training.evaluate --pair nano-subword --no-ar --strategy left_to_right --out ltr.json
    python -m nano_training.evaluate --pair nano --no-ar --thresholds 0.95 --scans=-4,-2,0,2,4 --out scans.json
    python -m nano_training.evaluate --pair nano-subword --no-ar --no-diffusion --self-speculative masks,runner-up --out ss.json
    python -m nano_training.evaluate --pair nano-subword --no-ar --no-diffusion --self-speculative runner-up --draft-length 8 --out ss8.json

``--strategy left_to_right`` reads the diffusion twin one token per step at the frontier: how well
the same weights read when the sampler never commits a token further into a block.

Pages: test-split text, 150 DPI, Helvetica / Times / Courier at 10-12 pt, clean renders, one or two
columns. Page CER is micro-averaged (total edits / total ground-truth characters) over the decoded
text of the whole page. Besides CER: tokens per forward, the share of tokens committed at their
block's first denoising step, denoising steps per block, and seconds per page (prefill included).

``--scans ANGLES`` reads each page instead as photographed JPEGs (mudiff_viz/inputs/photo.py: grey,
blur, noise, a lighting gradient, no text layer), one per angle, as a user's upload is read:
regions from the pixels after the page is straightened. Rows are labelled ``PAGE@ANGLE``; the
report's ``by_angle`` gives each setting's CER per angle (0 is the straight scan).
"""

from __future__ import annotations

import argparse
import inspect
import json
import random
import statistics
import time
from dataclasses import replace
from pathlib import Path

import torch

from models.nano.anchor import ANCHOR_REACH
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.metrics import cer, first_step_share, mean_steps_per_block
from mudiff_viz.decoding.pipeline import decode_page
from mudiff_viz.decoding.settings import KNOB, DecodeParams
from mudiff_viz.decoding.strategies import strategy_names
from mudiff_viz.inputs import synth
from mudiff_viz.inputs.page import Page
from mudiff_viz.inputs.pages import load_page
from mudiff_viz.inputs.photo import photographed

THRESHOLDS = (0.5, 0.75, 0.9, 0.95, 0.99)


SPLIT_SEEDS = {"test": 2024, "val": 777}  # "val": the pages training runs are chosen on; "test": read once


def eval_pages(pages_per_font: int, seed: int | None = None, fonts=tuple(synth.FONTS), split: str = "test") -> list[tuple[str, Page]]:
    """Held-out pages: (label, rendered page) for each Base-14 family at 10-12 pt, 150 DPI, with the
    text of ``split`` (never used in training)."""
    rng = random.Random(SPLIT_SEEDS[split] if seed is None else seed)
    out = []
    for font in fonts:
        for i in range(pages_per_font):
            style = synth.PageStyle(font=font, size=rng.choice([10.0, 11.0, 12.0]), columns=rng.choice([1, 1, 2]),
                                    margin=rng.uniform(54, 80), heading=rng.random() < 0.7)
            out.append((f"{font}-{i}", synth.random_page(rng, split, style=style).render(150)))
    return out


SCAN_SETUP = {name: p.default for name, p in inspect.signature(photographed).parameters.items()  # its defaults
              if p.default is not inspect.Parameter.empty and name not in ("angle", "seed")}


def scan_pages(pages: list[tuple[str, Page]], angles: list[float]) -> tuple[list[tuple[str, Page]], dict[str, str]]:
    """Each page photographed at each angle and loaded as an upload (a JPEG, no text layer), with
    the text of the page each was made from, by label (their reference for CER)."""
    scans, references = [], {}
    for k, (label, page) in enumerate(pages):
        for angle in angles:
            name = f"{label}@{angle:g}"
            scans.append((name, load_page(photographed(page, angle, seed=k))))
            references[name] = page.text
    return scans, references


def page_row(label: str, page: Page, setting: str, trace, seconds: float, ref: str | None = None) -> dict:
    ref = page.text if ref is None else ref
    return {
        "page": label, "setting": setting, "skew": trace.page.skew.angle if trace.page.skew else None, "edits": round(cer(trace.text, ref) * len(ref)), "chars": len(ref),
        "tokens": trace.metrics.tokens, "nfe": trace.metrics.nfe, "seconds": round(seconds, 3),
        "prefill_s": trace.metrics.prefill_s, "first_step_share": first_step_share(trace),
        "steps_per_block": mean_steps_per_block(trace),
    }


def twin_spec(pair: str, decoder: str) -> str:
    """The model spec a decoder runs for ``pair``: a registered pair name as is, or, for a path
    prefix P, the directory P-ar / P-diffusion (a candidate pair that is not installed)."""
    candidate = Path(f"{pair}-{decoder}")
    return str(candidate) if candidate.is_dir() else pair


def run(pair: str, pages, thresholds=THRESHOLDS, params: DecodeParams | None = None, log=print,
        with_ar: bool = True, references: dict[str, str] | None = None, self_speculative: tuple[str, ...] = ()) -> list[dict]:
    """One row per (page, setting). A setting is ``ar`` or ``diffusion@THRESHOLD`` (each threshold
    replacing ``params.threshold``), with the strategy appended when it is not the release's default
    (``diffusion@0.95/left_to_right``), or ``self-speculative/BRANCHES`` (the diffusion twin drafting
    and verifying itself, its tokens its block-length-1 decode's; one setting per ``draft_branches``
    value in ``self_speculative``). ``params``: the other decode settings (default: the release's).
    ``references``: the reference text by page label, for pages without a text layer (scans)."""
    rows = []
    base = params or DecodeParams()
    suffix = "" if base.strategy == "low_confidence_dynamic" else f"/{base.strategy}"
    runs = ([("ar", None)] if with_ar else []) + [("diffusion", t) for t in thresholds]
    runs += [("self-speculative", b) for b in self_speculative]
    for decoder, thr in runs:
        if decoder == "self-speculative":
            setting = f"self-speculative/{thr}"
            params = replace(base, more={**base.more, "draft_branches": thr})
            decoder_spec = "diffusion"
        else:
            setting = "ar" if decoder == "ar" else f"diffusion@{thr}{suffix}"
            params = base if thr is None else replace(base, threshold=thr)
            decoder_spec = decoder
        for label, page in pages:
            t0 = time.perf_counter()
            trace = decode_page(page, model=twin_spec(pair, decoder_spec), decoder=decoder, params=params)
            ref = references.get(label) if references else None
            rows.append(page_row(label, page, setting, trace, time.perf_counter() - t0, ref))
        log(f"{setting} {json.dumps(summarize(rows, setting))}")
    return rows


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def summarize(rows: list[dict], setting: str, prefix: str = "", suffix: str = "") -> dict:
    sel = [r for r in rows if r["setting"] == setting and r["page"].startswith(prefix) and r["page"].endswith(suffix)]
    chars = sum(r["chars"] for r in sel)
    return {
        "cer": sum(r["edits"] for r in sel) / max(1, chars),
        "page_cer_max": max(r["edits"] / r["chars"] for r in sel),
        "tokens_per_forward": sum(r["tokens"] for r in sel) / max(1, sum(r["nfe"] for r in sel)),
        "first_step_share": _mean(r["first_step_share"] for r in sel),
        "steps_per_block": _mean(r["steps_per_block"] for r in sel),
        "seconds_per_page_median": statistics.median(r["seconds"] for r in sel),
        "seconds_per_page_max": max(r["seconds"] for r in sel),
        "chars_per_page_mean": chars / len(sel),
        "pages": len(sel),
    }


def per_font_settings(settings: list[str]) -> list[str]:
    """The settings broken down per font: the AR twin, the diffusion twin at 0.95 (or, if 0.95
    was not run, its first threshold) and every self-speculative setting."""
    diffusion = [s for s in settings if s.startswith("diffusion")]
    headline = next((s for s in diffusion if s.split("/")[0] == "diffusion@0.95"), diffusion[0] if diffusion else None)
    return [s for s in settings if s in ("ar", headline) or s.startswith("self-speculative")]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m nano_training.evaluate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", default="nano", help="nano, nano-char, nano-subword, or a path prefix P of two directories P-ar and P-diffusion")
    ap.add_argument("--pages-per-font", type=int, default=4)
    ap.add_argument("--split", choices=sorted(SPLIT_SEEDS), default="test",
                    help="val: the validation pages checkpoints are chosen on (use --pages-per-font 2); test: the held-out pages, read once")
    ap.add_argument("--thresholds", default=",".join(str(t) for t in THRESHOLDS))
    ap.add_argument("--block-length", type=int, default=32)
    ap.add_argument("--strategy", default="low_confidence_dynamic", choices=strategy_names(),
                    help="the diffusion twin's remasking strategy")
    ap.add_argument("--no-ar", dest="with_ar", action="store_false", help="skip the AR twin")
    ap.add_argument("--no-diffusion", action="store_true", help="skip the diffusion twin (the AR twin alone)")
    ap.add_argument("--scans", default="", metavar="ANGLES",
                    help="read photographed JPEGs of the pages at these angles (comma-separated degrees) instead of the renders")
    ap.add_argument("--self-speculative", default="", metavar="BRANCHES",
                    help="also the self-speculative decoder with these draft branches (comma-separated: masks, runner-up)")
    ap.add_argument("--draft-length", type=int, default=KNOB["draft_length"].default,
                    help="the self-speculative decoder's draft length (0: the model's own)")
    ap.add_argument("--anchor-reach", type=int, default=None, metavar="N",
                    help="glyph anchoring reach of both twins (0: off; default: the backends' own, models/nano/anchor.py)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        thresholds = () if args.no_diffusion else tuple(float(x) for x in args.thresholds.split(","))
        angles = [float(x) for x in args.scans.split(",")] if args.scans else []
    except ValueError:
        ap.error(f"--thresholds and --scans: comma-separated numbers, got {args.thresholds!r}, {args.scans!r}")
    try:
        self_spec = KNOB["draft_branches"].values(args.self_speculative)
    except UserInputError as exc:
        ap.error(f"--self-speculative: {exc}")
    try:
        params = DecodeParams.from_knobs(block_length=args.block_length, steps=args.block_length, strategy=args.strategy,
                                         draft_length=args.draft_length, anchor_reach=args.anchor_reach)
    except UserInputError as exc:
        ap.error(str(exc))
    pages, references = eval_pages(args.pages_per_font, split=args.split), None
    if angles:
        pages, references = scan_pages(pages, angles)
    rows = run(args.pair, pages, thresholds, params, with_ar=args.with_ar, references=references, self_speculative=self_spec)
    settings = list(dict.fromkeys(r["setting"] for r in rows))
    report = {
        "pair": args.pair,
        "all": {s: summarize(rows, s) for s in settings},
        "per_font": {f: {s: summarize(rows, s, f) for s in per_font_settings(settings)} for f in synth.FONTS},
        "setup": {"dpi": 150, "split": args.split, "anchor_reach": ANCHOR_REACH if args.anchor_reach is None else args.anchor_reach, "pages_per_font": args.pages_per_font, "threads": args.threads,
                  **({"scans": {"angles": angles, **SCAN_SETUP}} if angles else {}),
                  **{k: v for k, v in params.knobs().items() if k not in ("threshold", "anchor_reach")}},
        "rows": rows,
    }
    if angles:
        report["by_angle"] = {s: {f"{a:g}": summarize(rows, s, suffix=f"@{a:g}") for a in angles} for s in settings}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
