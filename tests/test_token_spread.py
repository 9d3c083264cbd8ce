"""nano_training/token_spread.py: the spread of a masked token's start, by tokenizer shape."""

from __future__ import annotations

import numpy as np

from nano_training import token_spread


def test_start_spread_is_zero_for_equal_tokens_and_grows_with_the_offset():
    spread = token_spread.start_spread
    assert spread(np.full(50, 3.0), 2) == (0.0, 1.0)
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 8, 5000).astype(float)
    sd1, near1 = spread(lengths, 1)
    sd3, near3 = spread(lengths, 3)
    assert abs(sd1 - lengths.std()) < 1e-9  # one token: the spread of a length
    assert sd3 > sd1 and near3 < near1


def test_a_length_cap_shortens_every_token():
    from nano_training.tokenizer import train_tokenizer
    from mudiff_viz.inputs import synth

    texts = [p for d in synth.documents("train")[:30] for p in d.paragraphs]
    capped = train_tokenizer(texts, 400, max_token_length=3)
    free = train_tokenizer(texts, 400)
    sample = " ".join(texts[:20])

    def lengths(tok):
        return [len(tok.decode([i])) for i in tok.encode(sample).ids]

    assert max(lengths(capped)) <= 3 < max(lengths(free))
    assert capped.decode(capped.encode(sample).ids) == sample
