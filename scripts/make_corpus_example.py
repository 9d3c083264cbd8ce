"""The example corpus store the app's Corpus tab opens by default, and the 200-page run of docs/corpus.md.

    python scripts/make_corpus_example.py --pages 40 --levels 0,0.5,1 --out assets/corpus      # the shipped example
    python scripts/make_corpus_example.py --pages 200 --levels 0 --out runs/corpus-200          # the 200-page run

Pages: held-out synthetic text (test split), one paragraph of 25-60 words per page in the three
training font families, written as PDFs of 20 pages each into OUT/../corpus-pdfs (or --pdfs).
Then ``corpus run`` with the four decoders of the embedded pair at the given Semantic Shuffle levels
(and --occlude fractions), and with --stats DIR ``corpus stats`` into DIR.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mudiff_viz.inputs import synth  # noqa: E402

FONTS = ("helvetica", "times", "courier")


def write_pdfs(n_pages: int, folder: Path, seed: int = 31_000, per_pdf: int = 20) -> list[Path]:
    """``n_pages`` one-paragraph pages of held-out text, ``per_pdf`` pages per PDF."""
    import pymupdf

    rng = random.Random(seed)
    docs = synth.documents("test")
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for first in range(0, n_pages, per_pdf):
        out = pymupdf.open()
        for i in range(first, min(n_pages, first + per_pdf)):
            words = rng.choice(rng.choice(docs).paragraphs).split()
            start = rng.randrange(max(1, len(words) - 25))
            text = " ".join(words[start : start + rng.randint(25, 60)])
            style = synth.PageStyle(font=FONTS[i % 3], size=rng.choice([10.0, 11.0, 12.0]), columns=1, margin=72,
                                    heading=False)
            page = synth.make_page([text], style)
            src = pymupdf.open("pdf", page.pdf)
            out.insert_pdf(src)
            src.close()
        path = folder / f"heldout-{first // per_pdf:02d}.pdf"
        out.save(str(path))
        out.close()
        paths.append(path)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=40)
    ap.add_argument("--levels", default="0,0.5,1")
    ap.add_argument("--occlude", default="0")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--model", default="nano")
    ap.add_argument("--out", default=str(ROOT / "assets" / "corpus"))
    ap.add_argument("--pdfs", help="where the page PDFs go (default: OUT/../corpus-pdfs)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--decoders", default="diffusion,ar,self-speculative,speculative")
    ap.add_argument("--stats", help="also write corpus stats here (report.md, tables.json, figures.html)")
    args = ap.parse_args()
    out = Path(args.out).resolve()  # before the chdir below
    pdfs = Path(args.pdfs).resolve() if args.pdfs else out.parent / "corpus-pdfs"
    paths = write_pdfs(args.pages, pdfs)
    # sources relative to the repository when they are in it: the store then finds them in any clone
    paths = [p.resolve().relative_to(ROOT) if p.resolve().is_relative_to(ROOT) else p for p in paths]
    os.chdir(ROOT)
    from mudiff_viz.cli.main import main as cli

    t0 = time.time()
    code = cli(["corpus", "run", *map(str, paths), "--out", str(out), "--model", args.model, "--levels", args.levels,
                "--occlude", args.occlude, "--seeds", str(args.seeds), "--threads", str(args.threads),
                "--decoders", args.decoders])
    print(f"corpus run: exit {code}, {time.time() - t0:.0f} s")
    if args.stats and not code:
        code = cli(["corpus", "stats", str(out), "--out", args.stats])
    sys.exit(code)


if __name__ == "__main__":
    main()
