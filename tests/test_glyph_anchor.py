"""Glyph anchoring (models/nano/anchor.py): after a misread, the reading column moves back onto the
CTC head's reading of the line, on both nano pairs; the speculative decoders stay exactly equal to
their reference decodes with it, and it reads a held-out page better than counting characters."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from models.nano.anchor import ANCHOR_REACH, anchored_column
from models.registry import load_backend, set_anchor_reach
from mudiff_viz.core.metrics import cer
from mudiff_viz.decoding.pipeline import decode_page
from mudiff_viz.decoding.settings import DecodeParams
from nano_training.evaluate import eval_pages


def test_a_dropped_character_moves_the_column_onto_the_glyphs():
    ctc = "values (``nan``, ``inf``,"
    assert anchored_column("values (``an", ctc, 12) == 13  # "nan" read as "an": one column on
    assert anchored_column("values (``nan", ctc, 13) == 13  # text and CTC reading agree: nothing moves
    assert anchored_column("values (``naan", ctc, 14) == 13  # a character too many: one column back
    assert anchored_column("values (``an", ctc, 12, reach=0) == 12  # anchoring off
    assert anchored_column("values", "", 6) == 6  # no CTC reading: the counted column
    assert anchored_column("x" * 40, ctc, 40) == 40  # past the CTC reading's reach: counted


def test_ties_keep_the_counted_column():
    # "ax" is one edit from both "a" and "ab": the counted column wins
    assert anchored_column("ax", "abc", 2) == 2
    assert anchored_column("xy", "abcdef", 2) == 2  # nothing matches: every prefix is as far; counted


@contextmanager
def anchoring(pair: str, reach: int):
    """Both twins of ``pair`` with glyph anchoring at ``reach`` (0: off), restored afterwards."""
    try:
        set_anchor_reach(pair, reach)
        assert all(load_backend(pair, kind).anchor_reach == reach for kind in ("diffusion", "ar"))
        yield
    finally:
        set_anchor_reach(pair, ANCHOR_REACH)


# held-out validation pages (never trained on) where the block-length-1 decode drifts without anchoring
PAGES = {"nano-subword": "times-0", "nano-char": "times-0"}


@pytest.mark.parametrize("pair", sorted(PAGES))
def test_anchoring_reads_a_drifting_page_better_and_keeps_both_decoders_exact(pair):
    page = dict(eval_pages(2, split="val"))[PAGES[pair]]
    block_1 = DecodeParams.from_knobs(block_length=1, steps=1)
    with anchoring(pair, 0):
        counted = decode_page(page, model=pair, decoder="diffusion", params=block_1).text
    anchored = decode_page(page, model=pair, decoder="diffusion", params=block_1).text
    assert anchored != counted
    assert cer(anchored, page.text) < cer(counted, page.text) <= 0.06
    assert cer(anchored, page.text) <= 0.03
    spec = decode_page(page, model=pair, decoder="self-speculative")
    assert spec.text == anchored
    assert spec.metrics.tokens / spec.metrics.nfe >= 2.0
    assert decode_page(page, model=pair, decoder="speculative").text == decode_page(page, model=pair, decoder="ar").text
