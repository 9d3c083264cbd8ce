"""The subword pair's training objectives: SDAR's four attention rules and the mask draws."""

from __future__ import annotations

import torch

from nano_training.objectives import CLEAN, NOISY, PROMPT, draw_mask, masked_run_length, segment_mask


def test_segment_mask_follows_the_four_sdar_rules():
    # prompt of 2, then clean blocks 0,0,1,1 and their noisy copies 0,0,1,1
    kind = torch.tensor([[PROMPT, PROMPT, CLEAN, CLEAN, CLEAN, CLEAN, NOISY, NOISY, NOISY, NOISY]])
    block = torch.tensor([[-1, -1, 0, 0, 1, 1, 0, 0, 1, 1]])
    valid = torch.ones_like(kind, dtype=torch.bool)
    m = segment_mask(kind, block, valid)[0, 0]
    for q in range(10):
        for k in range(10):
            if kind[0, k] == PROMPT:
                want = True  # everyone sees the prompt (and the prompt sees only itself)
            elif kind[0, q] == PROMPT:
                want = False
            elif kind[0, q] == CLEAN and kind[0, k] == CLEAN:
                want = bool(block[0, k] <= block[0, q])
            elif kind[0, q] == NOISY and kind[0, k] == CLEAN:
                want = bool(block[0, k] < block[0, q])
            elif kind[0, q] == NOISY and kind[0, k] == NOISY:
                want = bool(block[0, k] == block[0, q])
            else:  # clean -> noisy
                want = False
            assert bool(m[q, k]) == want or q == k, (q, k)
    # padding is never attended (except by itself)
    valid[0, 5] = False
    m = segment_mask(kind, block, valid)[0, 0]
    assert not m[4, 5] and not m[8, 5] and m[5, 5]


def test_uniform_masks_follow_t_and_respect_padding():
    g = torch.Generator().manual_seed(0)
    real = torch.ones(400, 32, dtype=torch.bool)
    real[:, 24:] = False
    m = draw_mask(real, 8, g)
    assert not m[:, 24:].any() and m.any(1).all()
    share = m[:, :24].float().mean().item()
    assert 0.4 < share < 0.6  # E[p] = 1/2 under t ~ U(0, 1)


def test_suffix_masks_keep_a_clean_prefix_in_every_block():
    g = torch.Generator().manual_seed(1)
    real = torch.ones(200, 32, dtype=torch.bool)
    m = draw_mask(real, 8, g, suffix_share=1.0).view(200, 4, 8)
    # within a block, once masked always masked (a clean prefix, then the masked rest)
    assert (m[:, :, 1:] >= m[:, :, :-1]).all()
    cuts = (~m).sum(-1)
    assert set(cuts.unique().tolist()) == set(range(8))  # prefixes of every length 0..7
    mixed = draw_mask(torch.ones(2000, 16, dtype=torch.bool), 8, g, suffix_share=0.5).view(2000, 2, 8)
    suffix_like = ((mixed[:, :, 1:] >= mixed[:, :, :-1]).all(-1)).all(-1).float().mean().item()
    assert 0.5 < suffix_like < 0.7  # half the rows by construction, plus uniform rows that happen to look so


def test_masked_run_length_counts_the_masked_tokens_since_clean_text():
    # blocks of 4: [M M C M] [C C M M]; the run restarts at every block and after every clean token
    m = torch.tensor([[1, 1, 0, 1, 0, 0, 1, 1]], dtype=torch.bool)
    run = masked_run_length(m, 4)
    assert run[m].tolist() == [0, 1, 0, 0, 1]
    # under a suffix mask the run is the offset from the block's clean prefix
    g = torch.Generator().manual_seed(0)
    s = draw_mask(torch.ones(50, 32, dtype=torch.bool), 16, g, suffix_share=1.0)
    first = s.view(50, 2, 16).float().argmax(-1, keepdim=True)
    offset = (torch.arange(16) - first).clamp(min=0).view(50, 32)
    assert torch.equal(masked_run_length(s, 16)[s], offset[s])


def tiny_subword_model():
    from models.nano.model import NanoConfig, NanoOCR
    from models.nano.tokenizer import SubwordTokenizer
    from models.registry import twin_dir

    torch.manual_seed(0)
    tok = SubwordTokenizer(twin_dir("nano-subword", "ar") / "tokenizer.json")
    cfg = NanoConfig(kind="diffusion", d_model=64, n_layers=1, n_heads=2, mlp_hidden=128, enc_dim=64, enc_layers=1,
                     conv_channels=(8, 16, 16, 16), vocab_size=tok.vocab_size)
    return NanoOCR(cfg), tok


def test_near_weighting_and_a_frozen_vision_side():
    import random

    from nano_training.data import page_regions
    from nano_training.objectives import diffusion_loss
    from models.nano.model import CharTables

    model, tok = tiny_subword_model()
    tables = CharTables.of(tok)
    batch = page_regions(random.Random(3), "val", augment=False, dpi=120)[:3]

    def loss(**kw):
        return diffusion_loss(model, tok, tables, batch, 8, torch.Generator().manual_seed(5), 0.0, **kw)[1]["ce"]

    plain = loss()
    assert abs(loss(near_halflife=1e9) - plain) < 1e-4  # an endless half-life is the plain mean
    assert abs(loss(near_halflife=1.0) - plain) > 1e-3  # a short one weights the tokens differently

    total, parts = diffusion_loss(model, tok, tables, batch, 8, torch.Generator().manual_seed(5), 0.3, freeze_vision=True)
    total.backward()
    assert parts["ctc"] == 0.0
    assert all(p.grad is None for p in model.encoder.parameters())
    assert all(p.grad is None for p in model.projector.parameters())
    assert model.embed.weight.grad is not None and model.layers[0].attn.qkv.weight.grad.abs().sum() > 0


def test_own_guesses_commit_the_most_confident_masked_tokens_and_leave_one_per_block():
    from nano_training.objectives import commit_own_guesses

    masked = torch.tensor([[False, True, True, True, True, False, True, True]])  # blocks of 4
    logits = torch.full((1, 8, 5), -5.0)
    guess = [0, 1, 2, 3, 4, 0, 1, 2]
    strength = [0, 1, 4, 2, 3, 9, 1, 3]  # position 5 is the most confident but not masked
    for j in range(8):
        logits[0, j, guess[j]] = strength[j]
    # block 0 asks one commit: its most confident masked token (2); block 1 asks five, of three
    # masked: two, so one stays masked; position 5 is the most confident of all but not masked
    still, shown, commit = commit_own_guesses(logits, masked, 4, torch.tensor([[1, 5]]))
    assert commit.tolist() == [[False, False, True, False, True, False, False, True]]
    assert still.tolist() == [[False, True, False, True, False, False, True, False]]
    assert shown[0, 2] == 2 and shown[0, 4] == 4 and shown[0, 7] == 2  # the model's argmax, right or wrong
    # no commits asked, none made; a block with one masked token keeps it
    none = commit_own_guesses(logits, masked, 4, torch.tensor([[0, 0]]))[2]
    assert not none.any()
    one = torch.tensor([[False, False, True, False, True, True, True, True]])
    assert commit_own_guesses(logits, one, 4, torch.tensor([[3, 3]]))[0].view(2, 4).sum(-1).tolist() == [1, 1]


def test_a_share_of_rows_trains_on_its_own_committed_guesses():
    import random

    from nano_training.data import page_regions
    from models.nano.model import CharTables
    from nano_training.objectives import diffusion_loss

    model, tok = tiny_subword_model()
    tables = CharTables.of(tok)
    batch = page_regions(random.Random(3), "val", augment=False, dpi=120)[:3]
    plain = diffusion_loss(model, tok, tables, batch, 8, torch.Generator().manual_seed(5), 0.0)[1]
    total, own = diffusion_loss(model, tok, tables, batch, 8, torch.Generator().manual_seed(5), 0.0, own_share=1.0)
    total.backward()
    assert plain["own"] == 0.0 and 0.0 < own["own"] < 1.0
    assert own["masked"] < plain["masked"]  # the committed guesses are inputs now, not targets
    assert model.layers[0].attn.qkv.weight.grad.abs().sum() > 0


def test_a_grown_decoder_computes_the_same_function_and_then_trains_its_new_layers():
    """grow_decoder (train --init DIR --layers N) inserts layers that start as the identity: the
    loss is unchanged, and a training step moves the new layers."""
    import random

    import pytest

    from nano_training.data import page_regions
    from models.nano.model import CharTables, NanoConfig, NanoOCR
    from nano_training.objectives import diffusion_loss
    from nano_training.train import grow_decoder

    _, tok = tiny_subword_model()
    torch.manual_seed(1)
    model = NanoOCR(NanoConfig(kind="diffusion", d_model=64, n_layers=4, n_heads=2, mlp_hidden=128, enc_dim=64,
                               enc_layers=1, conv_channels=(8, 16, 16, 16), vocab_size=tok.vocab_size)).eval()
    grown = grow_decoder(model, 6).eval()
    assert grown.cfg.n_layers == 6 and len(grown.layers) == 6 and model.cfg.n_layers == 4
    tables = CharTables.of(tok)
    batch = page_regions(random.Random(3), "val", augment=False, dpi=120)[:3]

    def loss(m):
        return diffusion_loss(m, tok, tables, batch, 8, torch.Generator().manual_seed(5), 0.0)[0]

    with torch.no_grad():
        assert abs(loss(grown).item() - loss(model).item()) < 1e-5
    fresh = [grown.layers[3], grown.layers[4]]  # 4 layers grown by 2: inserted after layer index 2
    assert all(not b.attn.o.weight.any() and not b.mlp.down.weight.any() for b in fresh)
    assert torch.equal(grown.layers[3].attn.qkv.weight, model.layers[1].attn.qkv.weight)
    assert torch.equal(grown.layers[5].attn.qkv.weight, model.layers[3].attn.qkv.weight)
    grown.train()
    opt = torch.optim.SGD(grown.parameters(), lr=0.1)
    loss(grown).backward()
    opt.step()
    assert fresh[0].attn.o.weight.any()
    assert grow_decoder(model, 4) is model
    with pytest.raises(SystemExit, match="fewer"):
        grow_decoder(model, 3)


def test_reach_measures_how_far_past_committed_text_the_diffusion_twin_reads():
    """On held-out blocks, the token right after clean text is read best and the accuracy falls with
    the offset (positions further in are only estimated); the shares are well formed."""
    from nano_training.reach import held_out_blocks, measure
    from models.nano.weights import load_model
    from models.registry import twin_dir

    model, tok = load_model(twin_dir("nano-subword", "diffusion"))
    reach = measure(model, tok, held_out_blocks(1), block_size=32, threshold=0.95, max_offset=6)
    rows = {r.offset: r for r in reach.rows}
    assert sorted(rows) == list(range(7)) and all(r.tokens > 0 for r in rows.values())
    assert rows[0].accuracy >= 0.85
    assert rows[0].accuracy > rows[3].accuracy + 0.2 and rows[0].passing > rows[3].passing
    for r in rows.values():
        assert 0 <= r.accuracy <= 1 and 0 <= r.passing <= 1 and 0 <= r.passing_correct <= 1
        assert 0 < r.confidence <= 1
    assert reach.blocks == rows[0].tokens  # exactly one offset-0 text token per block with text left
    assert 0 <= reach.outranked_wrong <= reach.outranked <= 1
    # by start error: the token right after committed text knows exactly where it starts; further in,
    # the buckets split every offset's tokens and the estimate is off by more than a character for most
    by_error = {(e.offset, e.bucket): e for e in reach.by_start_error}
    assert [k for k in by_error if k[0] == 0] == [(0, "<= 1")] and by_error[(0, "<= 1")].tokens == rows[0].tokens
    for off in range(1, 7):
        assert sum(e.tokens for (o, _), e in by_error.items() if o == off) == rows[off].tokens
    assert by_error[(3, "> 2.5")].tokens > by_error[(3, "<= 1")].tokens
    assert all(0 <= e.accuracy <= 1 for e in by_error.values())


def test_count_scales_multiply_a_blocks_logits_by_the_masked_tokens_before_each():
    """scale_block_logits picks each token's scale by how many masked tokens precede it in its
    block (the last scale serves larger counts); a model without count scales is unchanged."""
    from models.nano.model import NanoConfig, NanoOCR

    small = dict(d_model=32, n_layers=1, n_heads=2, mlp_hidden=64, enc_dim=32, enc_layers=1,
                 conv_channels=(8, 8, 8, 8), vocab_size=16)
    model = NanoOCR(NanoConfig(kind="diffusion", count_scales=4, **small))
    with torch.no_grad():
        model.count_scale.copy_(torch.tensor([2.0, 3.0, 4.0, 5.0]))
    masked = torch.tensor([[True, False, True, True, True, True]])
    out = model.scale_block_logits(torch.ones(1, 6, 16), masked)
    assert out[0, :, 0].tolist() == [2.0, 3.0, 3.0, 4.0, 5.0, 5.0]
    plain = NanoOCR(NanoConfig(kind="diffusion", **small))
    logits = torch.randn(1, 6, 16)
    assert torch.equal(plain.scale_block_logits(logits, masked), logits)
    assert "count_scale" not in plain.state_dict()


def test_calibration_keeps_the_function_and_recovers_known_temperatures():
    """with_count_scales starts as the same function; fit_scales finds the scales that generated
    the targets (tokens at count 0 drawn from softmax(2 l), at count 1 from softmax(l / 2))."""
    import random

    from nano_training.calibrate import fit_scales, with_count_scales
    from nano_training.data import page_regions
    from models.nano.model import CharTables, NanoConfig, NanoOCR
    from nano_training.objectives import block_answers, denoise_logits, encode_batch

    _, tok = tiny_subword_model()
    torch.manual_seed(2)
    model = NanoOCR(NanoConfig(kind="diffusion", d_model=64, n_layers=2, n_heads=2, mlp_hidden=128, enc_dim=64,
                               enc_layers=1, conv_channels=(8, 16, 16, 16), vocab_size=tok.vocab_size)).eval()
    scaled = with_count_scales(model, 8)
    batch = page_regions(random.Random(4), "val", augment=False, dpi=120)[:2]
    tables = CharTables.of(tok)
    with torch.no_grad():
        clean = block_answers(tok, batch, 8)
        masked = draw_mask(clean != tok.pad_id, 8, torch.Generator().manual_seed(1), suffix_share=1.0)
        a = denoise_logits(model, tok, tables, encode_batch(model, batch), clean, masked, 8)
        b = denoise_logits(scaled, tok, tables, encode_batch(scaled, batch), clean, masked, 8)
    assert torch.allclose(a, b, atol=1e-5)

    gen = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(20000, 12, generator=gen)
    counts = torch.arange(20000) % 2
    true_scale = torch.where(counts == 0, 2.0, 0.5)
    targets = torch.multinomial((logits * true_scale[:, None]).softmax(-1), 1, generator=gen)[:, 0]
    fitted = fit_scales(logits, targets, counts, 2)
    assert abs(fitted[0].item() - 2.0) < 0.15 and abs(fitted[1].item() - 0.5) < 0.05


def test_calibrate_cli_writes_a_twin_with_fitted_scales_and_refuses_an_ar_twin(tmp_path, capsys):
    """python -m nano_training.calibrate on the shipped diffusion twin (one page): the written twin
    loads with its scales; the AR twin is refused with a one-line error."""
    import pytest

    from nano_training.calibrate import main
    from models.nano.weights import load_model
    from models.registry import twin_dir

    out = tmp_path / "calibrated"
    main([str(twin_dir("nano-subword", "diffusion")), str(out), "--pages", "1", "--held-out-pages", "1",
          "--scales", "8"])
    model, _ = load_model(out)
    assert model.cfg.count_scales == 8 and model.count_scale.shape == (8,)
    assert not torch.allclose(model.count_scale, torch.ones(8))
    assert "cross-entropy, training tokens" in capsys.readouterr().out
    with pytest.raises(SystemExit) as err:
        main([str(twin_dir("nano-subword", "ar")), str(tmp_path / "x")])
    assert err.value.code == 2 and "ar twin" in capsys.readouterr().err


def test_masked_runs_count_per_row_and_only_at_masked_tokens():
    from models.nano.model import masked_runs

    m = torch.tensor([[1, 1, 0, 1, 1, 1, 0, 0, 1], [0, 0, 0, 0, 1, 1, 1, 1, 1]], dtype=torch.bool)
    assert masked_runs(m).tolist() == [[0, 1, 0, 0, 1, 2, 0, 0, 0], [0, 0, 0, 0, 0, 1, 2, 3, 4]]


def shifted_twin(tmp_path, shifts):
    """A tiny random diffusion twin with per-head query shifts, saved as the backend loads it."""
    from models.nano.weights import save_model
    from models.registry import twin_dir

    model, tok = tiny_subword_model()
    model.cfg.query_shifts = shifts
    save_model(model, tmp_path / "twin", twin_dir("nano-subword", "ar") / "tokenizer.json")
    return tmp_path / "twin"


def test_query_shifts_move_only_the_queries_of_masked_tokens_past_the_frontier(tmp_path):
    """With all shifts zero the model is the same function as without; non-zero shifts change the
    logits of masked tokens with a masked run > 0 and nothing else (committed text and the token
    right after it look where they sit)."""
    import random

    from nano_training.data import page_regions
    from models.nano.model import CharTables
    from nano_training.objectives import block_answers, denoise_logits, encode_batch
    from models.nano.weights import load_model

    model, tok = load_model(shifted_twin(tmp_path, (0.0, 3.0)))
    assert model.cfg.query_shifts == (0.0, 3.0)  # survives config.json
    tables = CharTables.of(tok)
    batch = page_regions(random.Random(6), "val", augment=False, dpi=120)[:2]
    clean = block_answers(tok, batch, 8)
    masked = draw_mask(clean != tok.pad_id, 8, torch.Generator().manual_seed(2), suffix_share=1.0)
    with torch.no_grad():
        v = encode_batch(model, batch)
        shifted = denoise_logits(model, tok, tables, v, clean, masked, 8)
        model.cfg.query_shifts = (0.0, 0.0)
        zero = denoise_logits(model, tok, tables, v, clean, masked, 8)
        model.cfg.query_shifts = ()
        plain = denoise_logits(model, tok, tables, v, clean, masked, 8)
    assert torch.allclose(zero, plain, atol=1e-5)
    run = masked_run_length(masked, 8)
    far = masked & (run > 0)
    assert far.any() and (masked & (run == 0)).any()
    moved = (shifted - plain).abs().amax(-1) > 1e-4
    assert moved[far].all()
    assert not moved[~far & (clean != tok.pad_id)].any()


def test_the_backend_sees_a_block_as_training_does_with_query_shifts(tmp_path):
    """The decoder's logits for a block being denoised are the same through the backend (prefill,
    KV cache, positions walked from committed text, masked runs) as in the training forward: a
    model trained with query shifts reads at inference what it was trained on."""
    import random

    from models.nano.backend import NanoBackend
    from nano_training.data import RegionSample
    from models.nano.model import CharTables
    from nano_training.objectives import block_answers, denoise_logits, encode_batch
    from mudiff_viz.decoding.pipeline import regions_for
    from mudiff_viz.inputs import synth

    backend = NanoBackend(shifted_twin(tmp_path, (0.0, 3.0)))
    tok = backend.tok
    page = synth.random_page(random.Random(8), "val").render(120)
    regions = regions_for(backend, page)[:3]
    ctx = backend.encode(page, regions)
    samples = [RegionSample([c.pixels for c in crops], r.gt_text.split("\n")) for crops, r in zip(ctx.crops, regions)]
    clean = block_answers(tok, samples, 8)
    masked = torch.zeros_like(clean, dtype=torch.bool)
    masked[:, :8] = torch.tensor([False, True, True, False, True, True, True, True])
    masked &= clean != tok.pad_id
    with torch.inference_mode():
        want = denoise_logits(backend.model, tok, CharTables.of(tok), encode_batch(backend.model, samples), clean, masked, 8)
        block = torch.where(masked[:, :8], torch.full_like(clean[:, :8], tok.mask_id), clean[:, :8])
        got = backend.block_logits(ctx, block, torch.arange(len(regions)))
    assert torch.allclose(got, want[:, :8], atol=2e-4), (got - want[:, :8]).abs().max()


def test_train_refuses_query_shifts_that_do_not_match_the_heads(tmp_path):
    import pytest

    from nano_training import train

    twin = shifted_twin(tmp_path, ())
    with pytest.raises(SystemExit) as err:
        train.main(["--kind", "diffusion", "--init", str(twin), "--out", str(tmp_path / "run"), "--steps", "1",
                    "--query-shifts", "0,1,2"])
    assert "one value per head (2)" in str(err.value)
