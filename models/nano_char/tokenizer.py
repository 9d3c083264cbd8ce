"""Character-level tokenizer of the nano OCR models: printable ASCII, newline and five specials."""

from __future__ import annotations

PRINTABLE = "".join(chr(c) for c in range(32, 127))
SPECIALS = ("<pad>", "<bos>", "<eos>", "<mask>")


class CharTokenizer:
    """ids 0..3 are specials (<pad> doubles as the CTC blank), then newline, then printable ASCII."""

    def __init__(self) -> None:
        self.itos: list[str] = list(SPECIALS) + ["\n"] + list(PRINTABLE)
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id, self.mask_id = (self.stoi[s] for s in SPECIALS)
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
        return "".join(self.itos[i] for i in ids if i >= len(SPECIALS))
