"""Semantic Shuffle results for docs/semantic-shuffle.md: the nano pair on held-out synthetic pages.

    python scripts/run_shuffle_results.py --update-doc            # final run: 20 pages x 3 seeds
    python scripts/run_shuffle_results.py --pages 2 --seeds 1 \\
        --model diffusion=/tmp/nano-diffusion-dev,ar=runs/nano-ar --out /tmp/shuffle-smoke   # smoke test

Pages come from the test split of the synthetic corpus (text never seen in training), one random
style each (font family, size, columns, margins, leading). Writes results.json/.csv, summary.json,
figure.html (plotly from its CDN), figure.png, pages.json and table.md into --out; --update-doc also replaces the results block of
docs/semantic-shuffle.md with table.md (its links then point into --out). Runs on one CPU thread (training jobs share the machine).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mudiff_viz.inputs import synth  # noqa: E402
from mudiff_viz.probes.bench import (  # noqa: E402
    BenchPage,
    parse_levels,
    parse_models,
    run_shuffle_benchmark,
    summary_lines,
    write_outputs,
)

DOC = ROOT / "docs" / "semantic-shuffle.md"
BEGIN, END = "<!-- shuffle-results:begin -->", "<!-- shuffle-results:end -->"
PAGE_SEED = 60_000  # page i uses random.Random(PAGE_SEED + i): disjoint from the sample pages' seeds


def synthetic_pages(n: int) -> tuple[list[BenchPage], list[dict]]:
    """n held-out pages (test split) with their styles, for the record."""
    pages, meta = [], []
    for i in range(n):
        sp = synth.random_page(random.Random(PAGE_SEED + i), "test")
        name = f"synth-test-{i:02d}"
        pages.append(BenchPage(name=name, data=sp.pdf, trusted=True))
        s = sp.style
        meta.append({"page": name, "font": s.font, "size": s.size, "columns": s.columns, "paper": s.paper,
                     "lines": len(sp.lines), "chars": len(sp.text), "documents": sp.doc_names})
    return pages, meta


def weights_id(spec: str, decoder: str) -> str:
    """Short SHA-256 of the weights a spec loads (so the table says which checkpoint it measured)."""
    from models.registry import NANO_DIR, SHIPPED

    family = SHIPPED.get(spec)
    folder = NANO_DIR / f"{family}-{decoder}" if family else Path(spec)
    path = folder / "model.safetensors"
    if not path.is_file():
        return "unknown"
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def mean_of(rows: list[dict], decoder: str, level: float, key: str) -> float:
    vals = [r[key] for r in rows if r["decoder"] == decoder and r["level"] == level and r[key] is not None]
    return sum(vals) / len(vals) if vals else float("nan")


def table_md(rows: list[dict], summary: dict, meta: dict, at: str = "") -> str:
    """The results block: run facts, one table row per decoder and level, and the headline changes.
    ``at``: where the result files are, relative to the Markdown file that shows the block."""
    out = [
        f"Run {meta['date']} at commit `{meta['commit']}`: {meta['pages']} held-out synthetic pages x "
        f"{meta['seeds']} seeds, levels {', '.join(f'{v:g}' for v in meta['levels'])}; "
        + "; ".join(f"{d} = `{s}` (weights `{meta['weights'][d]}`)" for d, s in meta["models"].items())
        + f"; {meta['threads']} CPU thread(s), {meta['elapsed_min']:.1f} min.",
        "",
        "| decoder | level | CER (mean) | CER range over seeds | mean confidence | confidently wrong "
        "(share of erroneous tokens, conf > 0.9) | tokens / page | NFE / page | wall s / page |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for decoder, s in summary.items():
        for lv, c in s["cer_by_level"].items():
            lo, hi = s["cer_seed_range"][lv]
            share = s["confident_error_share_by_level"][lv]
            out.append(
                f"| {decoder} | {lv:g} | {100 * c:.2f}% | {100 * lo:.2f}-{100 * hi:.2f}% | "
                f"{mean_of(rows, decoder, lv, 'mean_confidence'):.3f} | "
                f"{'n/a' if share is None else f'{100 * share:.1f}%'} | "
                f"{mean_of(rows, decoder, lv, 'tokens'):.0f} | {mean_of(rows, decoder, lv, 'nfe'):.0f} | "
                f"{mean_of(rows, decoder, lv, 'wall_s'):.2f} |"
            )
    out += ["", *[f"- {line}" for line in summary_lines(summary)], "",
            f"![CER vs shuffle level, bars = range over seeds]({at}figure.png)", "",
            f"Interactive: [figure.html]({at}figure.html). Rows: "
            f"[results.csv]({at}results.csv); pages and styles: [pages.json]({at}pages.json)."]
    return "\n".join(out)


def write_doc_figures(figure, out: Path) -> None:
    """For the docs: figure.html loading plotly from its CDN (kB, not 4.8 MB) and a PNG to read inline."""
    figure.write_html(out / "figure.html", include_plotlyjs="cdn", full_html=True)
    try:
        figure.write_image(out / "figure.png", width=900, height=520)
    except Exception as exc:  # kaleido needs a Chromium; the HTML and the table are there anyway
        print(f"note: figure.png not written ({type(exc).__name__}: {exc})")


def files_at(out: Path, doc: Path) -> str:
    """``out`` as a link prefix from ``doc``'s folder (the block in the doc links into ``out``)."""
    return Path(os.path.relpath(out.resolve(), doc.resolve().parent)).as_posix() + "/"


def replace_marked_block(doc: Path, begin: str, end: str, block: str) -> None:
    """Rewrite the text between the ``begin`` and ``end`` markers of ``doc`` (the generated results)."""
    text = doc.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise SystemExit(f"{doc} lacks the {begin} ... {end} markers")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(f"{head}{begin}\n{block}\n{end}{tail}", encoding="utf-8")


def update_doc(block: str) -> None:
    replace_marked_block(DOC, BEGIN, END, block)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--levels", default="0,0.25,0.5,1")
    ap.add_argument("--model", default="nano", help="nano, or diffusion=SPEC,ar=SPEC")
    ap.add_argument("--dpi", type=float, default=150)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "docs" / "results" / "semantic-shuffle"))
    ap.add_argument("--update-doc", action="store_true", help="rewrite the results block of docs/semantic-shuffle.md")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    levels = parse_levels(args.levels)
    models = parse_models(args.model)
    pages, page_meta = synthetic_pages(args.pages)
    start = time.time()

    def progress(done: int, total: int, message: str) -> None:
        el = time.time() - start
        eta = el / done * (total - done)
        print(f"[{done}/{total}] {message}  ({el / 60:.1f} min, ~{eta / 60:.1f} min left)", flush=True)

    result = run_shuffle_benchmark(pages, levels, args.seeds, model=args.model, progress=progress, dpi=args.dpi)
    out = Path(args.out)
    paths = write_outputs(result, out)
    write_doc_figures(result.figure, out)
    (out / "pages.json").write_text(json.dumps(page_meta, indent=1), encoding="utf-8")
    meta = {
        "date": dt.date.today().isoformat(), "commit": git_commit(), "pages": args.pages, "seeds": args.seeds,
        "levels": levels, "models": models, "weights": {d: weights_id(s, d) for d, s in models.items()},
        "threads": args.threads, "elapsed_min": (time.time() - start) / 60,
    }
    (out / "table.md").write_text(table_md(result.rows, result.summary, meta) + "\n", encoding="utf-8")
    print("\n".join(summary_lines(result.summary)))
    print(f"wrote {', '.join(str(p) for p in paths.values())}, {out / 'table.md'}")
    if args.update_doc:
        update_doc(table_md(result.rows, result.summary, meta, at=files_at(out, DOC)))
        print(f"updated {DOC}")


if __name__ == "__main__":
    main()
