"""How much of a diffusion twin's page CER is the end-of-text filler committed ahead of the text.

    python scripts/filler_at_frontier.py --pair runs/cand5 [--pages-per-font 4]

A diagnostic, not a strategy: strategies see confidences, not guesses, so this script replaces
``BlockScheduler.step`` for its own run with the release's rule plus one restriction: a guess of
``<|endoftext|>`` may be committed only at the frontier (the first masked position of its block).
Compare its CER with ``python -m mudiff_viz.bench.evaluate --pair P --no-ar`` on the same pages
(docs/nano-models.md, "Where the release sampler loses the text").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mudiff_viz.bench import evaluate  # noqa: E402
from mudiff_viz.decoding import scheduler  # noqa: E402
from mudiff_viz.decoding.strategies import CommitInputs  # noqa: E402


def filler_only_at_frontier(eos_id: int):
    """A ``BlockScheduler.step`` that keeps ``eos_id`` guesses behind the frontier masked."""

    def step(self, logits, masked, step_index):
        if step_index >= self.params.steps:
            return self.force(logits, masked)
        p = self.params
        x0, conf, probs = scheduler.sample_tokens(logits, p.temperature, p.top_k, p.top_p, self.generator)
        frontier = masked & (masked.long().cumsum(-1) == 1)
        allowed = masked & ((x0 != eos_id) | frontier)  # never empty while a position is masked
        quota = torch.full_like(masked[:, 0], self.quota[step_index], dtype=torch.long)
        quota = torch.clamp(quota, max=allowed.sum(-1))
        scores = torch.where(allowed, conf, torch.full_like(conf, float("-inf")))
        chosen = self.select(CommitInputs(scores, allowed, quota, p.threshold, self.generator))
        committed = chosen & allowed & (x0 != self.mask_id)
        return scheduler.step_output(x0, conf, probs, committed, torch.zeros_like(masked))

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", required=True, help="a registered subword pair or a candidate prefix P (P-ar, P-diffusion)")
    ap.add_argument("--pages-per-font", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    from models.nano.tokenizer import SubwordTokenizer

    spec = Path(evaluate.twin_spec(args.pair, "diffusion"))
    if not (spec / "tokenizer.json").is_file():
        from models.registry import NANO_DIR, SHIPPED
        spec = NANO_DIR / f"{SHIPPED.get(args.pair, args.pair)}-diffusion"
    if not (spec / "tokenizer.json").is_file():
        sys.exit(f"error: no subword tokenizer for {args.pair!r} (looked in {spec})")
    torch.set_num_threads(args.threads)
    scheduler.BlockScheduler.step = filler_only_at_frontier(SubwordTokenizer(spec / "tokenizer.json").eos_id)
    evaluate.run(args.pair, evaluate.eval_pages(args.pages_per_font), thresholds=(0.95,), with_ar=False)


if __name__ == "__main__":
    main()
