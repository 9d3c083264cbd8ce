"""Semantic Shuffle x occlusion on an embedded pair, for docs/nano-models.md: does either twin lean on
a language prior?

    python scripts/run_subword_probe.py                      # nano-subword, 6 held-out pages x 2 seeds
    python scripts/run_subword_probe.py --model nano-char --out docs/results/nano-char-probe

Held-out synthetic pages (the same generator and seeds as docs/semantic-shuffle.md), shuffle levels
0 and 1 (every line's words shuffled) crossed with 0% and 20% occluded words, both decoders at the
app's defaults (block 32, threshold 0.95, deterministic). Writes results.json, summary.json,
conditions.md and figure.html into --out (``shuffle-bench``'s outputs) and prints the grid.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mudiff_viz.probes.bench import condition_markdown, run_shuffle_benchmark, write_outputs  # noqa: E402
from scripts.run_shuffle_results import synthetic_pages  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="nano-subword")
    ap.add_argument("--pages", type=int, default=6)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "docs" / "results" / "nano-subword-probe"))
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    pages, _ = synthetic_pages(args.pages)
    t0 = time.time()
    result = run_shuffle_benchmark(
        pages, levels=[0.0, 1.0], seeds=args.seeds, model=args.model, occlusions=[0.0, 0.2],
        knobs={"block_length": 32, "steps": 32, "threshold": 0.95},
        progress=lambda done, total, msg: print(f"[{done}/{total}] {msg}", flush=True),
    )
    write_outputs(result, args.out)
    print(condition_markdown(result.conditions))
    print(f"{args.model}: {args.pages} pages x {args.seeds} seeds in {(time.time() - t0) / 60:.1f} min -> {args.out}")


if __name__ == "__main__":
    main()
