"""The ``numerics`` knob (docs/real-models.md#bfloat16-numerics): "release" applies RoPE and takes the
probabilities in the model's dtype, as the MinerU-Diffusion release does; "float32" computes both in
float32. Run on CPU in bfloat16 on a tiny random MinerU-Diffusion checkpoint written here (the
checkpoint writer of tests/test_real_models.py). The release's formulas are spelled out below from
its modeling code, independently of ours."""

from __future__ import annotations

import pytest
import torch

from models import registry
from models.mineru_diffusion.backend import MinerUDiffusionBackend
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import check_invariants
from mudiff_viz.decoding.pipeline import decode_page, make_params
from mudiff_viz.decoding.scheduler import BlockScheduler
from mudiff_viz.decoding.settings import KNOB
from mudiff_viz.inputs.pages import load_page
from tests.test_real_models import page_png, write_diffusion_checkpoint  # noqa: F401  (fixture)

BF16 = torch.bfloat16


@pytest.fixture(scope="module")
def bf16_spec(tmp_path_factory):
    """A tiny checkpoint's backend in bfloat16 (what a GPU runs), put where decode_page finds it."""
    model_dir = write_diffusion_checkpoint(tmp_path_factory.mktemp("mineru-diffusion-bf16"))
    backend = MinerUDiffusionBackend(model_dir, device="cpu")
    backend.model.to(BF16)
    registry._cache.clear()
    registry._cache[(str(model_dir), "diffusion", "cpu")] = backend
    yield str(model_dir), backend
    registry._cache.clear()


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _layer0_keys(backend, ids: torch.Tensor, cast: bool) -> torch.Tensor:
    """Layer 0's keys for ``ids`` at positions 0..n-1: the release's RoPE (cos/sin computed in float32,
    cast to the model dtype, rotation in it) when ``cast``, else rotated in float32 and cast back."""
    m, cfg = backend.model, backend.cfg.text
    attn = m.decoder.layers[0].self_attn
    x = m.decoder.layers[0].input_layernorm(m.embed(ids[None]))
    k = attn.k_norm(attn.k_proj(x).view(1, ids.shape[0], cfg.num_key_value_heads, cfg.head_dim)).transpose(1, 2)
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim))
    freqs = torch.arange(ids.shape[0], dtype=torch.float32)[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    if cast:
        return k * cos.to(k.dtype) + _rotate_half(k) * sin.to(k.dtype)
    return (k.float() * cos + _rotate_half(k).float() * sin).to(k.dtype)


@pytest.mark.parametrize("numerics", ["release", "float32"])
def test_rope_runs_in_the_dtype_the_numerics_name(bf16_spec, numerics):
    _, backend = bf16_spec
    ids = torch.arange(3, 40)  # positions far enough out that bf16 rounding of cos/sin shows
    cache = backend.model.prefill(backend.model.embed(ids[None]), 8, rope_in_dtype=numerics == "release")
    stored = cache.k[0][:, :, : ids.shape[0]]
    assert stored.dtype == BF16
    with torch.inference_mode():
        ours = _layer0_keys(backend, ids, numerics == "release")
        other = _layer0_keys(backend, ids, numerics != "release")
    assert torch.equal(stored, ours)
    assert not torch.equal(stored, other)  # the two modes are two different computations


def test_probabilities_run_in_the_model_dtype_under_release(bf16_spec):
    _, backend = bf16_spec
    logits = torch.randn(1, 4, backend.cfg.text.vocab_size)
    release = BlockScheduler(make_params(numerics="release"), backend.mask_id, None, BF16)
    ours = BlockScheduler(make_params(numerics="float32"), backend.mask_id, None)
    masked = torch.ones(1, 4, dtype=torch.bool)
    assert release.sample.probs(logits).dtype == BF16 and ours.sample.probs(logits).dtype == torch.float32
    assert release.step(logits, masked, 0).confidence.dtype == torch.float32  # recorded exactly, as float32
    assert release.key != ours.key  # a captured step graph is never shared between the two


def _logits(rest: list[float], vocab: int = 8) -> torch.Tensor:
    """(1, len(rest), vocab) logits: token 0 at 0, every other token at ``rest[i]`` (all exact in
    bfloat16, as a bf16 lm_head hands them over)."""
    rows = [[0.0] + [r] * (vocab - 1) for r in rest]
    out = torch.tensor([rows], dtype=torch.float32)
    assert torch.equal(out.to(BF16).float(), out)
    return out


def test_commits_differ_from_float32_just_above_the_threshold():
    """At threshold 0.95 a bfloat16 probability passes only once it rounds to 0.953125 (0.95 itself
    becomes 0.94921875, the next value up is 0.953125): between 0.95 and about 0.9512 float32
    commits and the release does not."""
    assert torch.tensor(0.95, dtype=BF16).item() == 0.94921875
    near = -4.90625  # the one bfloat16 logit whose float32 probability lands in (0.95, 0.9512)
    logits = _logits([near, near, -7.0, -1.0])  # two just above 0.95, one far above, one far below
    p32 = logits.softmax(-1)[0, :, 0]
    assert 0.95 < p32[0].item() < 0.9512 and p32[2].item() > 0.99 and p32[3].item() < 0.5
    masked = torch.ones(1, 4, dtype=torch.bool)
    params = dict(block_length=4, steps=4, threshold=0.95, strategy="low_confidence_dynamic")  # quota 1
    ours = BlockScheduler(make_params(**params, numerics="float32"), 7, None).step(logits, masked, 0)
    release = BlockScheduler(make_params(**params, numerics="release"), 7, None, BF16).step(logits, masked, 0)
    assert ours.committed[0].tolist() == [True, True, True, False]
    assert release.committed[0].tolist() == [False, False, True, False]
    assert release.confidence[0, 0].item() == 0.94921875  # rounded down onto the bf16 threshold: not above it
    # far from the threshold the two agree
    far = _logits([-8.0, -1.0, -2.0, -0.5])
    ours = BlockScheduler(make_params(**params, numerics="float32"), 7, None).step(far, masked, 0)
    release = BlockScheduler(make_params(**params, numerics="release"), 7, None, BF16).step(far, masked, 0)
    assert torch.equal(ours.committed, release.committed)


@pytest.mark.parametrize("asked, recorded", [("auto", "release"), ("release", "release"), ("float32", "float32")])
def test_the_mode_that_ran_is_recorded(bf16_spec, page_png, asked, recorded):  # noqa: F811
    spec, _ = bf16_spec
    trace = decode_page(load_page(page_png), model=spec, decoder="diffusion",
                        params=make_params(max_new_tokens=16, block_length=8, steps=8, numerics=asked))
    check_invariants(trace)
    assert trace.params["numerics"] == recorded


def test_release_and_float32_decodes_of_one_bf16_model(bf16_spec, page_png):  # noqa: F811
    """Both modes decode the same page on the same weights; where RoPE rounding moves a logit, the
    guesses and confidences differ (the tiny random model has no text to agree on)."""
    spec, _ = bf16_spec
    page = load_page(page_png)
    runs = {n: decode_page(page, model=spec, decoder="diffusion",
                           params=make_params(max_new_tokens=16, block_length=8, steps=8, numerics=n))
            for n in ("release", "float32")}
    conf = {n: [s.confidences for s in t.steps] for n, t in runs.items()}
    assert conf["release"] != conf["float32"]


def test_a_float32_model_runs_float32_by_default(tmp_path, page_png):  # noqa: F811
    model_dir = write_diffusion_checkpoint(tmp_path / "ckpt")
    registry._cache.clear()
    try:
        trace = decode_page(load_page(page_png), model=str(model_dir), decoder="diffusion",
                            params=make_params(max_new_tokens=8, block_length=8, steps=8))
    finally:
        registry._cache.clear()
    assert trace.params["numerics"] == "float32"  # a CPU model's weights are float32: nothing to round


def test_models_without_the_knob_refuse_a_mode(tmp_path):
    from tests.ui_support import SAMPLE, make_tiny_twins

    registry._cache.clear()
    old = registry.NANO_DIR
    registry.NANO_DIR = make_tiny_twins(tmp_path)
    try:
        with pytest.raises(UserInputError, match="leave it at auto"):
            decode_page(load_page(SAMPLE), model="nano", decoder="diffusion",
                        params=make_params(max_new_tokens=8, numerics="release"))
    finally:
        registry.NANO_DIR = old
        registry._cache.clear()
    assert KNOB["numerics"].default == "auto" and KNOB["numerics"].own == "auto"


def test_the_fixed_shape_path_applies_the_same_numerics(bf16_spec):
    """The forward the CUDA graphs replay (graphs.BlockGraphs without graphs: the same fixed-shape
    forward, run eagerly) reads the mode from the cache as the eager path does."""
    from models.mineru_diffusion.graphs import BlockGraphs

    _, backend = bf16_spec
    prompt, block = torch.arange(3, 20), torch.arange(20, 28)
    for release in (True, False):
        with torch.inference_mode():
            cache = backend.model.prefill(backend.model.embed(prompt[None]), 8, rope_in_dtype=release)
            BlockGraphs(backend.model, use_graphs=False).forward(cache, block[None], store=True)
            ids = torch.cat([prompt, block])
            stored = cache.k[0][:, :, prompt.shape[0]: ids.shape[0]]
            want = _layer0_keys(backend, ids, release)[:, :, prompt.shape[0]:]
            other = _layer0_keys(backend, ids, not release)[:, :, prompt.shape[0]:]
        assert torch.equal(stored, want) and not torch.equal(stored, other)
