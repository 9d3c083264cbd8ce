"""The character pair's block-size training phase (nano_training/char_train.py) and the subword
objective's line-break weight: the training query is the decode query, and the scripts run."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import torch

from models.registry import load_backend
from mudiff_viz.decoding.pipeline import regions_for
from mudiff_viz.inputs import synth


def test_a_block_size_1_training_row_is_the_self_speculative_query():
    """With block size 1, every masked character in the training forward sees exactly what the
    block-length-1 decode shows the model: the prompt, the clean characters before it, and one
    <mask> at its own position. So its logits equal the backend's, one committed character at a time."""
    from models.nano.preprocess import collate
    from nano_training.char_train import denoise_logits
    from nano_training.objectives import block_ids

    backend = load_backend("nano-char", "diffusion")
    tok, model = backend.tok, backend.model
    page = synth.random_page(random.Random(5), "val").render(150)
    regions = regions_for(backend, page)[:2]
    texts = [r.gt_text for r in regions]
    ctx = backend.encode(page, regions)
    clean = block_ids(tok, texts, 1)
    with torch.inference_mode():
        images, widths = collate([c.pixels for c in ctx.crops])
        want = denoise_logits(model, tok, model.encode(images, widths), clean, clean != tok.pad_id, 1)
        rows = torch.arange(len(regions))
        mask = torch.full((len(regions), 1), tok.mask_id)
        for k in range(6):
            got = backend.block_logits(ctx, mask, rows)[:, 0]
            assert torch.allclose(got, want[:, k], atol=2e-4), (k, (got - want[:, k]).abs().max())
            backend.commit_block(ctx, clean[:, k : k + 1], rows)
    # and the model reads: the training forward's argmax is the text on these held-out lines
    first = want.argmax(-1)[:, :6]
    assert (first == clean[:, :6]).float().mean() >= 0.9


def test_char_train_runs_and_writes_weights_the_backend_loads(tmp_path):
    from nano_training import char_train
    from nano_training.data import RegionPool
    from models.nano_char.backend import NanoCharBackend

    pool = RegionPool(random.Random(1), pages=1, log=None)
    pool.save(tmp_path / "pool.npz")
    out = tmp_path / "run"
    char_train.main(["--init", "assets/models/nano-char-diffusion", "--out", str(out), "--steps", "4",
                     "--batch", "4", "--pool-cache", str(tmp_path / "pool.npz"), "--log-every", "1",
                     "--eval-every", "4", "--refresh-every", "1000", "--val-pages", "1", "--block-sizes", "1:0.5,8:0.5"])
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "ce" in r]
    assert len(steps) == 4 and all(math.isfinite(r["ce"]) for r in steps)
    assert {r["block"] for r in steps} <= {1, 8}
    assert all(r["masked"] == 1.0 for r in steps if r["block"] == 1)  # block 1: every character a frontier read
    evals = [r["eval"] for r in rows if "eval" in r]
    assert evals and set(evals[-1]) == {"b1_ce", "b1_acc", "b32_ce", "b32_acc"}
    backend = NanoCharBackend(out)
    assert backend.kind == "diffusion"
    shipped = load_backend("nano-char", "diffusion").model.state_dict()
    moved = [k for k, v in backend.model.state_dict().items() if not torch.equal(v, shipped[k])]
    assert moved
    assert not any(k.startswith(("encoder.", "ctc_head.", "projector.")) for k in moved)  # the vision side stays
    # exported as the app ships it: float16 storage, config.json, no tokenizer file; it loads as the character pair
    from safetensors import safe_open

    from nano_training import export

    export.main([str(out), str(tmp_path / "shipped")])
    assert sorted(p.name for p in (tmp_path / "shipped").iterdir()) == ["config.json", "model.safetensors"]
    with safe_open(str(tmp_path / "shipped" / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}
    assert load_backend(str(tmp_path / "shipped"), "diffusion").name == "nano-char-diffusion"


def test_line_break_tokens_and_their_weight():
    """``break_weight`` weights the newline token and the first token of the next line, and only them."""
    from models.nano.model import CharTables
    from nano_training.objectives import line_break_tokens

    backend = load_backend("nano-subword", "diffusion")
    tok = backend.tok
    ids = torch.tensor([tok.encode("first line\nsecond one\nthird")])
    marks = line_break_tokens(ids, CharTables.of(tok))[0].tolist()
    texts = [tok.token_text(i) for i in ids[0].tolist()]
    for k, text in enumerate(texts):
        at_break = "\n" in text or (k > 0 and "\n" in texts[k - 1])
        assert marks[k] == at_break, (k, text)
    assert sum(marks) == 4


def test_break_weight_changes_only_the_weighting_of_the_loss():
    """With no line break among the masked tokens the weight changes nothing; with breaks it moves
    the loss toward theirs."""
    from models.nano.model import CharTables
    from nano_training.data import RegionSample
    from nano_training.objectives import diffusion_loss

    backend = load_backend("nano-subword", "diffusion")
    page = synth.random_page(random.Random(3), "val").render(150)
    regions = [r for r in regions_for(backend, page) if "\n" in r.gt_text][:2]
    ctx = backend.encode(page, regions)
    batch = [RegionSample([c.pixels for c in crops], r.gt_text.split("\n")) for crops, r in zip(ctx.crops, regions)]
    tables = CharTables.of(backend.tok)

    def loss(weight: float, near: float = 2.0) -> float:
        with torch.inference_mode():
            return diffusion_loss(backend.model, backend.tok, tables, batch, 1, torch.Generator().manual_seed(0),
                                  near_halflife=near, freeze_vision=True, break_weight=weight)[1]["ce"]

    assert loss(1.0) == loss(1.0, near=2.0)
    assert not np.isclose(loss(4.0), loss(1.0))


def test_misread_neighbours_are_one_edit_away_and_never_special():
    """What the misread context swaps in: a vocabulary token one character dropped, added or changed."""
    from rapidfuzz.distance import Levenshtein

    from nano_training.objectives import misread_neighbours

    tok = load_backend("nano-subword", "diffusion").tok
    near = misread_neighbours(tok)
    specials = {tok.eos_id, tok.bos_id, tok.im_end_id, tok.image_pad_id, tok.mask_id, tok.pad_id}
    assert all(not near[i] for i in specials)
    for i in tok.encode("values (``nan``, ``inf``, the"):
        text = tok.token_text(i)
        assert near[i], text
        for j in near[i]:
            assert j not in specials and Levenshtein.distance(text, tok.token_text(j)) == 1, (text, tok.token_text(j))
    assert tok.encode("`")[0] in near[tok.encode("``")[0]]  # the misreading behind a ``````...`` run


def test_misread_context_swaps_some_tokens_for_neighbours_and_keeps_the_targets():
    """The loss with a misread context still scores the true tokens: at rate 0 it is the plain loss;
    at a rate it changes, and the context it used differs from the truth only at neighbour swaps."""
    from models.nano.model import CharTables
    from nano_training.data import RegionSample
    from nano_training.objectives import diffusion_loss, misread_context, misread_neighbours

    backend = load_backend("nano-subword", "diffusion")
    tok = backend.tok
    near = misread_neighbours(tok)
    clean = torch.tensor([tok.encode("If ``allow_nan`` is false, then it will be a ``ValueError`` to serialize")] * 8)
    noisy = misread_context(clean, near, 0.2, torch.Generator().manual_seed(1))
    changed = (noisy != clean).nonzero().tolist()
    assert 0.1 * clean.numel() < len(changed) < 0.3 * clean.numel()
    assert all(int(noisy[r, c]) in near[int(clean[r, c])] for r, c in changed)

    page = synth.random_page(random.Random(3), "val").render(150)
    regions = regions_for(backend, page)[:2]
    ctx = backend.encode(page, regions)
    batch = [RegionSample([c.pixels for c in crops], r.gt_text.split("\n")) for crops, r in zip(ctx.crops, regions)]
    tables = CharTables.of(tok)

    def loss(rate: float) -> float:
        with torch.inference_mode():
            return diffusion_loss(backend.model, tok, tables, batch, 1, torch.Generator().manual_seed(0),
                                  freeze_vision=True, misread_rate=rate, neighbours=near)[1]["ce"]

    plain = loss(0.0)
    assert not np.isclose(loss(0.3), plain)
    assert loss(0.3) > plain  # misread context makes the true next token harder to read, not easier


def test_own_misreads_are_the_models_block_size_1_errors():
    """The ``own`` misread source puts into the context exactly the tokens the model gets wrong at
    block size 1 (its argmax from true context), all of them at rate 1 and none at rate 0."""
    from models.nano.model import CharTables
    from nano_training.objectives import block_ids, denoise_logits, encode_batch, own_misreads
    from nano_training.data import RegionSample

    backend = load_backend("nano-subword", "diffusion")
    tok, model = backend.tok, backend.model
    page = synth.random_page(random.Random(8), "val", style=synth.PageStyle(font="helvetica", size=10.0)).render(150)
    regions = regions_for(backend, page)[:4]
    ctx = backend.encode(page, regions)
    batch = [RegionSample([c.pixels for c in crops], r.gt_text.split("\n")) for crops, r in zip(ctx.crops, regions)]
    tables = CharTables.of(tok)
    with torch.inference_mode():
        v = encode_batch(model, batch)
        clean = block_ids(tok, [r.text for r in batch], 1)
        guess = denoise_logits(model, tok, tables, v, clean, clean != tok.pad_id, 1).argmax(-1)
        none = own_misreads(model, tok, tables, v, clean, 0.0, torch.Generator().manual_seed(0))
        every = own_misreads(model, tok, tables, v, clean, 1.0, torch.Generator().manual_seed(0))
    assert torch.equal(none, clean)
    changed = every != clean
    assert changed.any()  # a 10 pt Helvetica page: the model misreads some tokens
    assert torch.equal(every[changed], guess[changed])
    assert changed.sum() < 0.1 * (clean != tok.pad_id).sum()  # ... and reads most of them
    untouched = (guess == clean) | (clean == tok.eos_id) | (guess == tok.eos_id)
    assert not changed[untouched].any()


def test_distilling_the_ar_twin_lines_up_its_next_token_reads_with_block_size_1_reads():
    """At block size 1 each masked token of the twin asks what the AR twin asks at the same index
    (the next token after true context), so the teacher's row i and the twin's masked position i
    both read answer token i; w = 0 leaves the loss alone, w > 0 adds the divergence (the CE logged stays the CE)."""
    from models.nano.model import CharTables
    from nano_training.data import RegionSample
    from nano_training.objectives import ar_logits, block_ids, diffusion_loss, encode_batch, pad_ids

    twin = load_backend("nano-subword", "diffusion")
    teacher = load_backend("nano-subword", "ar").model
    tok = twin.tok
    page = synth.random_page(random.Random(6), "val").render(150)
    regions = regions_for(twin, page)[:3]
    ctx = twin.encode(page, regions)
    batch = [RegionSample([c.pixels for c in crops], r.gt_text.split("\n")) for crops, r in zip(ctx.crops, regions)]
    tables = CharTables.of(tok)
    with torch.inference_mode():
        clean = block_ids(tok, [r.text for r in batch], 1)
        ids = [tok.encode(r.text) for r in batch]
        reads = ar_logits(teacher, tok, tables, encode_batch(teacher, batch), pad_ids(ids, tok.pad_id)).argmax(-1)
        assert reads.shape == clean.shape
        real = clean != tok.pad_id
        assert (reads[real] == clean[real]).float().mean() >= 0.9  # shifted by one it would be near 0

        def parts(w: float) -> dict:
            return diffusion_loss(twin.model, tok, tables, batch, 1, torch.Generator().manual_seed(0), freeze_vision=True,
                                  teacher=teacher, distill_weight=w)[1]

        plain, none, half = parts(0.0), diffusion_loss(twin.model, tok, tables, batch, 1, torch.Generator().manual_seed(0),
                                                       freeze_vision=True)[1], parts(0.5)
    assert plain["ce"] == none["ce"] and plain["kl"] == 0.0
    assert half["ce"] == none["ce"] and 0.0 < half["kl"] < 1.0  # the twins mostly agree: a small divergence


def test_anchored_training_positions_are_the_backends(tmp_path):
    """With ``anchor_reach`` the block-size-1 training forward places each character where the
    backend's anchored block-length-1 decode does, also where anchoring moves it: a twin whose
    CTC head is perturbed misreads its lines, and the logits still match one commit at a time."""
    from models.nano.anchor import ANCHOR_REACH
    from models.nano.preprocess import collate
    from models.nano_char.backend import NanoCharBackend
    from models.nano_char.weights import save_model
    from nano_training.char_train import anchored_positions, ctc_readings, denoise_logits
    from nano_training.objectives import block_ids

    shipped = load_backend("nano-char", "diffusion")
    torch.manual_seed(0)
    model = shipped.model.float()
    noisy = type(model)(model.cfg)
    noisy.load_state_dict(model.state_dict())
    with torch.no_grad():
        noisy.ctc_head.weight.add_(0.6 * torch.randn_like(noisy.ctc_head.weight))
    save_model(noisy, tmp_path / "twin")
    backend = NanoCharBackend(tmp_path / "twin")
    tok = backend.tok
    page = synth.random_page(random.Random(5), "val").render(150)
    regions = regions_for(backend, page)[:3]
    ctx = backend.encode(page, regions)
    clean = block_ids(tok, [r.gt_text for r in regions], 1)
    real = clean != tok.pad_id
    n = 30
    with torch.inference_mode():
        images, widths = collate([c.pixels for c in ctx.crops])
        v = backend.model.encode(images, widths)
        assert ctc_readings(backend.model, tok, v) == ctx.ctc_lines
        positions = anchored_positions(tok, clean, ctx.ctc_lines, ANCHOR_REACH, 1)
        assert (positions[:, :n] != torch.arange(n))[real[:, :n]].any()  # anchoring moves characters here
        want = denoise_logits(backend.model, tok, v, clean, real, 1, ANCHOR_REACH)
        rows = torch.arange(len(regions))
        mask = torch.full((len(regions), 1), tok.mask_id)
        for k in range(n):
            got = backend.block_logits(ctx, mask, rows)[:, 0]
            on = real[:, k]
            assert torch.allclose(got[on], want[on, k], atol=2e-4), (k, (got[on] - want[on, k]).abs().max())
            backend.commit_block(ctx, clean[:, k : k + 1], rows)
    # blocks of 8: the shift moves once per committed block, as the block decode commits them
    ctx = backend.encode(page, regions)
    clean = block_ids(tok, [r.gt_text for r in regions], 8)
    real = clean != tok.pad_id
    masked = torch.zeros_like(real)
    masked[:, 8:16] = real[:, 8:16]
    with torch.inference_mode():
        want = denoise_logits(backend.model, tok, v, clean, masked, 8, ANCHOR_REACH)
        backend.commit_block(ctx, clean[:, :8], rows)
        got = backend.block_logits(ctx, torch.full((len(regions), 8), tok.mask_id), rows)
    on = real[:, 8:16]
    assert torch.allclose(got[on], want[:, 8:16][on], atol=2e-4), (got[on] - want[:, 8:16][on]).abs().max()
