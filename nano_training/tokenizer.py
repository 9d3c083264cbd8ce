"""Train the nano pair's subword vocabulary: a byte-level BPE on the training split only.

    python -m nano_training.tokenizer --out runs/tokenizer.json --vocab-size 2048

The runtime reads the result with ``models.nano.tokenizer.SubwordTokenizer``.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from models.nano.tokenizer import SUBWORD_SPECIALS, SubwordTokenizer
from mudiff_viz.inputs import synth


def wrap_like_lines(text: str, rng: random.Random, every: float = 12.0) -> str:
    """Break a paragraph at some spaces, as line wrapping does, so merges across '\\n' are learnt."""
    words = text.split(" ")
    out = [words[0]]
    for w in words[1:]:
        out.append(("\n" if rng.random() < 1.0 / every else " ") + w)
    return "".join(out)


def train_tokenizer(texts: list[str], vocab_size: int, seed: int = 0, max_token_length: int | None = None):
    """Train the byte-level BPE on ``texts`` (the training split); returns a ``tokenizers.Tokenizer``.
    ``max_token_length`` caps a token's length (none for the shipped pair; nano_training/token_spread.py)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    rng = random.Random(seed)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SUBWORD_SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
        **({"max_token_length": max_token_length} if max_token_length else {}),
    )
    tok.train_from_iterator([wrap_like_lines(t, rng) for t in texts], trainer)
    return tok


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m nano_training.tokenizer", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--vocab-size", type=int, default=2048)
    args = ap.parse_args(argv)
    train = [p for d in synth.documents("train") for p in d.paragraphs]
    tok = train_tokenizer(train, args.vocab_size)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(args.out))
    sub = SubwordTokenizer(args.out)
    test = [p for d in synth.documents("test") for p in d.paragraphs]
    print(f"wrote {args.out}: {sub.vocab_size} ids; characters per token: train {sub.chars_per_token(train):.3f}, "
          f"test {sub.chars_per_token(test):.3f}")


if __name__ == "__main__":
    main()
