"""How well a masked token's start is known, for byte-level BPE tokenizers of several shapes.

    python -m nano_training.token_spread

The diffusion twin places a masked token where the committed text before it ends plus
``chars_per_token`` for each masked token between (models/nano/model.py, ``walk``). How far the
true start is from that estimate is set by the tokenizer alone: the spread of the summed lengths
of the r tokens before it. This prints that spread on test-split text for the shipped shape (2,048
ids, no length cap) and for other vocabulary sizes and length caps, each trained on the training
split as models/nano/tokenizer.py does (docs/nano-models.md, "Query-shift heads").
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from nano_training.tokenizer import train_tokenizer
from mudiff_viz.inputs import synth

SHAPES = ((2048, None), (1024, None), (4096, None), (2048, 4), (2048, 3))


def start_spread(lengths: np.ndarray, offset: int) -> tuple[float, float]:
    """(standard deviation in characters, share within one character) of the summed length of
    ``offset`` consecutive tokens minus ``offset`` times the mean length."""
    run = np.concatenate([[0.0], np.cumsum(lengths)])
    err = (run[offset:] - run[:-offset]) - offset * lengths.mean()
    return float(err.std()), float((np.abs(err) <= 1.0).mean())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--test-paragraphs", type=int, default=1500)
    args = ap.parse_args(argv)
    train = [p for d in synth.documents("train") for p in d.paragraphs]
    test = [p for d in synth.documents("test") for p in d.paragraphs][: args.test_paragraphs]
    print("| ids | length cap | characters per token | spread of the start (sd, characters) at offset 1 / 2 / 3 "
          "| within one character at offset 1 / 2 |")
    print("|---|---|---|---|---|")
    for vocab, cap in SHAPES:
        tok = train_tokenizer(train, vocab, max_token_length=cap)
        lengths = np.array([len(tok.decode([i])) for t in test for i in tok.encode(t).ids], dtype=float)
        spread = [start_spread(lengths, r) for r in (1, 2, 3)]
        print(f"| {vocab} | {cap or 'none'} | {lengths.mean():.2f} | "
              f"{' / '.join(f'{sd:.2f}' for sd, _ in spread)} | {spread[0][1]:.2f} / {spread[1][1]:.2f} |")


if __name__ == "__main__":
    main()
