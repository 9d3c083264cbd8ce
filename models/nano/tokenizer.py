"""Tokenizers of the nano models.

- :class:`SubwordTokenizer`: the decoder's vocabulary, a byte-level BPE trained with ``tokenizers``
  on the training split only (as the real model's Qwen2 vocabulary is byte-level BPE). Its special
  tokens mirror the real model's: ``<|endoftext|>`` and ``<|im_end|>`` stop a decode,
  ``<|im_start|>`` opens the answer, ``<|image_pad|>`` is the placeholder the visual tokens replace,
  ``<|MASK|>`` is the diffusion mask.
- :class:`CharTokenizer`: printable ASCII, the alphabet of the vision encoder's CTC head (and the
  whole vocabulary of the character pair, ``nano-char``).

The vocabulary is trained by ``python -m nano_training.tokenizer`` (the training package) and
written next to the weights as ``tokenizer.json``; this module only reads it.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np

PRINTABLE = "".join(chr(c) for c in range(32, 127))
CHAR_SPECIALS = ("<pad>", "<bos>", "<eos>", "<mask>")
SUBWORD_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|image_pad|>", "<|MASK|>", "<|pad|>")


class CharTokenizer:
    """ids 0..3 are specials (<pad> doubles as the CTC blank), then newline, then printable ASCII."""

    def __init__(self) -> None:
        self.itos: list[str] = list(CHAR_SPECIALS) + ["\n"] + list(PRINTABLE)
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id, self.mask_id = (self.stoi[s] for s in CHAR_SPECIALS)
        self.unk_id = self.stoi["?"]

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        return [self.stoi.get(ch, self.unk_id) for ch in text]

    def token_text(self, token_id: int) -> str:
        """Display text of one id; specials keep their angle-bracket names."""
        return self.itos[token_id] if 0 <= token_id < len(self.itos) else "<unk>"

    def decode(self, ids) -> str:
        return "".join(self.itos[i] for i in ids if i >= len(CHAR_SPECIALS))


class SubwordTokenizer:
    """A byte-level BPE (``tokenizer.json``) with the real model's special tokens at ids 0..5."""

    def __init__(self, path: str | Path) -> None:
        from tokenizers import Tokenizer

        self.path = Path(path)
        self.tok = Tokenizer.from_file(str(self.path))
        ids = [self.tok.token_to_id(s) for s in SUBWORD_SPECIALS]
        if ids != list(range(len(SUBWORD_SPECIALS))):
            raise ValueError(f"{path}: special tokens must be {SUBWORD_SPECIALS} at ids 0..5, got {ids}")
        self.eos_id, self.bos_id, self.im_end_id, self.image_pad_id, self.mask_id, self.pad_id = ids
        self.stop_ids = frozenset({self.eos_id, self.im_end_id})

    @property
    def vocab_size(self) -> int:
        return self.tok.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text).ids

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids if int(i) >= len(SUBWORD_SPECIALS)])

    def token_text(self, token_id: int) -> str:
        """Display text of one id; specials keep their names."""
        if 0 <= token_id < len(SUBWORD_SPECIALS):
            return SUBWORD_SPECIALS[token_id]
        if not 0 <= token_id < self.vocab_size:
            return "<unk>"
        return self.tok.decode([token_id])

    @cached_property
    def char_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per id: characters it writes, newlines among them, characters after its last newline.

        These move a reading position along committed text (see ``model.walk``); specials write
        nothing."""
        n = self.vocab_size
        length, newlines, tail = np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32)
        for i in range(len(SUBWORD_SPECIALS), n):
            text = self.tok.decode([i])
            length[i] = len(text)
            newlines[i] = text.count("\n")
            tail[i] = len(text) - text.rfind("\n") - 1 if "\n" in text else len(text)
        return length, newlines, tail

    @cached_property
    def pieces(self) -> list[str]:
        """Per id: the text it writes (specials write nothing), as committed text grows by it."""
        length = self.char_tables[0]
        return [self.tok.decode([i]) if length[i] else "" for i in range(self.vocab_size)]

    def chars_per_token(self, texts: list[str]) -> float:
        n = sum(len(self.encode(t)) for t in texts)
        return sum(len(t) for t in texts) / max(1, n)
