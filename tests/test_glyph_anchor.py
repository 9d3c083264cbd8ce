"""Glyph anchoring (models/nano/anchor.py): after a misread, the reading column moves back onto the
CTC head's reading of the line, on both nano pairs; the speculative decoders stay exactly equal to
their reference decodes with it, and it reads a held-out page better than counting characters."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from models.nano.anchor import ANCHOR_REACH, anchored_column
from models.registry import load_backend
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


# held-out validation pages (never trained on) where the block-length-1 decode drifts without anchoring
PAGES = {"nano-subword": "times-0", "nano-char": "times-0"}


@pytest.mark.parametrize("pair", sorted(PAGES))
def test_anchoring_reads_a_drifting_page_better_and_keeps_both_decoders_exact(pair):
    page = dict(eval_pages(2, split="val"))[PAGES[pair]]
    block_1 = {"block_length": 1, "steps": 1}
    # the two reaches at once on the one shared backend, as two visitors of the app would: the reach
    # is the decode's (the anchor_reach knob), not the backend's
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(decode_page, page, model=pair, decoder="diffusion", params=DecodeParams.from_knobs(**block_1, **knob))
                for knob in ({"anchor_reach": 0}, {})]
        off, on = (r.result() for r in runs)
    counted, anchored = off.text, on.text
    assert off.params["anchor_reach"] == 0 and on.params["anchor_reach"] == ANCHOR_REACH  # -1 recorded as what ran
    assert load_backend(pair, "diffusion").anchor_reach == ANCHOR_REACH  # the backend's own is untouched
    assert anchored != counted
    assert cer(anchored, page.text) < cer(counted, page.text) <= 0.06
    assert cer(anchored, page.text) <= 0.03
    spec = decode_page(page, model=pair, decoder="self-speculative")
    assert spec.text == anchored
    assert spec.metrics.tokens / spec.metrics.nfe >= 2.0
    assert decode_page(page, model=pair, decoder="speculative").text == decode_page(page, model=pair, decoder="ar").text


def test_training_positions_walk_as_the_anchored_decoders_do(tmp_path):
    """With ``anchor_reach`` the training forward gives, at every token, the logits the backend gives
    when the true text is committed one token at a time with anchoring on: block size 1 for the
    diffusion twin. A tiny random twin reads its lines badly with
    its CTC head, so anchoring moves the column on most tokens here (checked)."""
    import random

    import torch

    from models.nano.backend import NanoBackend
    from models.nano.model import CharTables
    from mudiff_viz.decoding.pipeline import regions_for
    from mudiff_viz.inputs import synth
    from nano_training.data import RegionSample
    from nano_training.objectives import Anchoring, block_answers, denoise_logits, encode_batch
    from tests.test_nano_objectives import shifted_twin

    backend = NanoBackend(shifted_twin(tmp_path, ()))
    tok, tables = backend.tok, CharTables.of(backend.tok)
    page = synth.random_page(random.Random(8), "val").render(120)
    regions = regions_for(backend, page)[:2]
    ctx = backend.encode(page, regions)
    samples = [RegionSample([c.pixels for c in crops], r.gt_text.split("\n")) for crops, r in zip(ctx.crops, regions)]
    clean = block_answers(tok, samples, 1)
    real = clean != tok.pad_id
    rows = torch.arange(len(regions))
    n = 24
    with torch.inference_mode():
        v = encode_batch(backend.model, samples)
        anchoring = Anchoring.of(backend.model, tok, v, samples, ANCHOR_REACH)
        assert anchoring.lines == ctx.ctc_lines  # the same CTC readings as the decoder's
        want = denoise_logits(backend.model, tok, tables, v, clean, real, 1, anchoring=anchoring)
        counted = denoise_logits(backend.model, tok, tables, v, clean, real, 1)
        got, moved = [], 0
        for j in range(n):
            mask = torch.full((len(regions), 1), tok.mask_id)
            got.append(backend.block_logits(ctx, mask, rows)[:, 0])
            before = ctx.col.clone()
            backend.commit_block(ctx, clean[:, j : j + 1], rows)
            moved += int(((ctx.col != before + tables.length[clean[:, j]]) & real[:, j]).sum())
        got = torch.stack(got, 1)
    on = real[:, :n]  # a row's tokens up to its stop token (padding after it is never read)
    assert moved >= 5, moved  # anchoring is at work on this twin
    assert torch.allclose(got[on], want[:, :n][on], atol=2e-4), (got[on] - want[:, :n][on]).abs().max()
    assert not torch.allclose(got[on], counted[:, :n][on], atol=2e-4)  # counted positions would differ
