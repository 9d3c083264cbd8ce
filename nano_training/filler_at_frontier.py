"""How much of a diffusion twin's page CER is the end-of-text filler committed ahead of the text.

    python -m nano_training.filler_at_frontier --pair runs/cand5 [--pages-per-font 4]

A diagnostic, not one of the app's strategies: it registers, for its own run only, the release's
rule plus one restriction: a guess of ``<|endoftext|>`` may be committed only at the frontier
(the first masked position of its block). It reads the guesses the scheduler passes strategies.
Compare its CER with ``python -m nano_training.evaluate --pair P --no-ar`` on the same pages
(docs/nano-models.md, "Where the release sampler loses the text").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from mudiff_viz.decoding.settings import DecodeParams
from mudiff_viz.decoding.strategies import CommitInputs, low_confidence_dynamic, register_strategy
from nano_training import evaluate

NAME = "filler_at_frontier"


def register_filler_at_frontier(eos_id: int) -> None:
    """Register NAME: ``low_confidence_dynamic`` over the masked positions minus ``eos_id`` guesses
    behind the frontier."""

    @register_strategy(NAME, "diagnostic: the release's rule, <|endoftext|> committed only at the frontier")
    def filler_at_frontier(step: CommitInputs) -> torch.Tensor:
        frontier = step.masked & (step.masked.long().cumsum(-1) == 1)
        allowed = step.masked & ((step.guesses != eos_id) | frontier)  # never empty while a position is masked
        scores = torch.where(allowed, step.confidence, torch.full_like(step.confidence, float("-inf")))
        return low_confidence_dynamic(CommitInputs(scores, allowed, torch.clamp(step.quota, max=allowed.sum(-1)),
                                                   step.threshold, step.generator, step.guesses)) & allowed


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
    register_filler_at_frontier(SubwordTokenizer(spec / "tokenizer.json").eos_id)
    evaluate.run(args.pair, evaluate.eval_pages(args.pages_per_font), thresholds=(0.95,), with_ar=False,
                 params=DecodeParams(strategy=NAME))


if __name__ == "__main__":
    main()
