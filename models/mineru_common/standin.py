"""A stand-in tokenizer for random-weight runs (the GPU check): no real checkpoint files needed.

A small byte-level BPE with the Qwen2-VL special tokens, written as ``tokenizer.json`` so the
real loading code (:class:`models.mineru_common.text.ChatText`) reads it. Its ids are small and do
not match the real model's; that is fine for timing, where every id is read from the files anyway.
"""

from __future__ import annotations

from pathlib import Path

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|ref_start|>",
    "<|ref_end|>",
    "<|rotate_up|>",
    "<|MASK|>",
)
CORPUS = ("You are a helpful assistant. Text Recognition: Table Recognition: Formula Recognition: Layout Detection: Layout Analysis:",)


def write_standin_tokenizer(out_dir: Path, vocab_size: int = 400) -> dict[str, int]:
    """Write tokenizer.json into ``out_dir``; returns the special-token ids and the vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(CORPUS) * 10, trainer)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    ids = {s: tok.token_to_id(s) for s in SPECIAL_TOKENS}
    ids["vocab"] = tok.get_vocab_size()
    return ids
