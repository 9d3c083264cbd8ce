"""The real-model loaders, exercised with tiny random checkpoints written here in the official layout.

No network and no real weights: each checkpoint directory holds config.json (with ``auto_map`` and
``model_type`` as released), sharded safetensors with an index, a tokenizer built with the
``tokenizers`` library whose special-token ids differ from the real ones, preprocessor_config.json
and chat_template.jinja. They load through the user's path (``models.registry.load_backend``).
State-dict names are spelled out below from docs/real-models.md, independently of the model code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw
from safetensors.torch import save_file

from models import registry
from models.mineru_common.layout import parse_layout
from models.mineru_diffusion.model import MinerUDiffusion, sdar_mask
from mudiff_viz.core.errors import ModelLoadError
from mudiff_viz.core.trace import Trace, check_invariants
from mudiff_viz.decoding.pipeline import decode_page
from mudiff_viz.decoding.settings import DecodeParams
from mudiff_viz.inputs.pages import load_page

ROOT = Path(__file__).resolve().parent.parent

SPECIALS = [  # trained first: ids 0..11, far from the real 151643..151669
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|ref_start|>",
    "<|ref_end|>",
    "<|rotate_up|>",
    "<|MASK|>",
]
QWEN2VL_TEMPLATE = """{% set image_count = namespace(value=0) %}{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system
You are a helpful assistant.<|im_end|>
{% endif %}<|im_start|>{{ message['role'] }}
{% if message['content'] is string %}{{ message['content'] }}<|im_end|>
{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in content %}{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>
{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""
CLIP_MEAN, CLIP_STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
VISION = {  # tiny Qwen2-VL ViT: real patch geometry, tiny width
    "model_type": "qwen2_vl",
    "depth": 1,
    "embed_dim": 32,
    "hidden_size": 64,
    "num_heads": 2,
    "mlp_ratio": 2,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "spatial_merge_size": 2,
    "in_channels": 3,
    "hidden_act": "quick_gelu",
}
TEXT = {  # tiny SDAR: GQA 4 heads / 2 KV heads
    "model_type": "sdar",
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "hidden_act": "silu",
    "attention_bias": False,
    "tie_word_embeddings": False,
    "max_position_embeddings": 32768,
}


# ---- checkpoint writers ----------------------------------------------------------------------------


def write_tokenizer_files(out: Path, extra_tokens: tuple[str, ...] = ()) -> dict[str, int]:
    """A byte-level BPE tokenizer.json + tokenizer_config.json + chat_template.jinja; returns special
    ids (and each of ``extra_tokens``' ids: added, not special, after the trained vocabulary)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=330,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [
        "Text Recognition: the quick brown fox jumps over the lazy dog",
        "Layout Detection: table title text",
        "Layout Analysis: table title text",
    ] * 20
    tok.train_from_iterator(corpus, trainer)
    if extra_tokens:
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in extra_tokens])
    tok.save(str(out / "tokenizer.json"))
    ids = {s: tok.token_to_id(s) for s in SPECIALS}
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "Qwen2Tokenizer",
                "model_max_length": 32768,
                "eos_token": "<|im_end|>",
                "added_tokens_decoder": {str(i): {"content": s, "special": True} for s, i in ids.items()},
            }
        )
    )
    (out / "chat_template.jinja").write_text(QWEN2VL_TEMPLATE)
    (out / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "image_processor_type": "Qwen2VLImageProcessor",
                "min_pixels": 3136,
                "max_pixels": 28 * 28 * 48,
                "patch_size": 14,
                "temporal_patch_size": 2,
                "merge_size": 2,
                "image_mean": CLIP_MEAN,
                "image_std": CLIP_STD,
            }
        )
    )
    ids["vocab"] = tok.get_vocab_size()
    ids.update({t: tok.token_to_id(t) for t in extra_tokens})
    return ids


def diffusion_state(vocab: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Random tensors under the official key names (docs/real-models.md), in bfloat16 like the release."""
    e, h, d = VISION["embed_dim"], TEXT["hidden_size"], TEXT["head_dim"]
    m, inter = int(e * VISION["mlp_ratio"]), TEXT["intermediate_size"]
    q, kv = TEXT["num_attention_heads"] * d, TEXT["num_key_value_heads"] * d
    shapes = {"vision_model.patch_embed.proj.weight": (e, 3, 2, 14, 14)}
    for i in range(VISION["depth"]):
        b = f"vision_model.blocks.{i}."
        shapes.update(
            {
                b + "norm1.weight": (e,),
                b + "norm1.bias": (e,),
                b + "norm2.weight": (e,),
                b + "norm2.bias": (e,),
                b + "attn.qkv.weight": (3 * e, e),
                b + "attn.qkv.bias": (3 * e,),
                b + "attn.proj.weight": (e, e),
                b + "attn.proj.bias": (e,),
                b + "mlp.fc1.weight": (m, e),
                b + "mlp.fc1.bias": (m,),
                b + "mlp.fc2.weight": (e, m),
                b + "mlp.fc2.bias": (e,),
            }
        )
    a = "vision_abstractor.projection."
    shapes.update(
        {
            a + "ln_q.weight": (e,),
            a + "ln_q.bias": (e,),
            a + "mlp.0.weight": (4 * e, 4 * e),
            a + "mlp.0.bias": (4 * e,),
            a + "mlp.2.weight": (h, 4 * e),
            a + "mlp.2.bias": (h,),
        }
    )
    shapes["language_model.model.embed_tokens.weight"] = (vocab, h)
    for i in range(TEXT["num_hidden_layers"]):
        b = f"language_model.model.layers.{i}."
        shapes.update(
            {
                b + "self_attn.q_proj.weight": (q, h),
                b + "self_attn.k_proj.weight": (kv, h),
                b + "self_attn.v_proj.weight": (kv, h),
                b + "self_attn.o_proj.weight": (h, q),
                b + "self_attn.q_norm.weight": (d,),
                b + "self_attn.k_norm.weight": (d,),
                b + "mlp.gate_proj.weight": (inter, h),
                b + "mlp.up_proj.weight": (inter, h),
                b + "mlp.down_proj.weight": (h, inter),
                b + "input_layernorm.weight": (h,),
                b + "post_attention_layernorm.weight": (h,),
            }
        )
    shapes.update({"language_model.model.norm.weight": (h,), "language_model.lm_head.weight": (vocab, h)})
    state = {}
    for key, shape in shapes.items():
        if "norm" in key and key.endswith("weight") or key.endswith("ln_q.weight"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        else:
            t = (0.5 if "embed_tokens" in key else 0.15) * torch.randn(shape, generator=gen)
        state[key] = t.to(torch.bfloat16)
    return state


def write_shards(out: Path, state: dict[str, torch.Tensor], n: int = 2) -> None:
    keys = sorted(state)
    weight_map, total = {}, 0
    for s in range(n):
        name = f"model-{s + 1:05d}-of-{n:05d}.safetensors"
        part = {k: state[k].contiguous() for k in keys[s::n]}
        save_file(part, str(out / name), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, name))
        total += sum(t.numel() * t.element_size() for t in part.values())
    (out / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )


def write_diffusion_checkpoint(out: Path, state_edit=None, extra_tokens: tuple[str, ...] = ()) -> Path:
    """A tiny random MinerU-Diffusion checkpoint; ``state_edit(state, ids)`` may change its tensors
    (``ids``: the special tokens' and ``extra_tokens``' ids)."""
    out.mkdir(parents=True, exist_ok=True)
    ids = write_tokenizer_files(out, extra_tokens)
    config = {
        "architectures": ["MinerUDiffusionForConditionalGeneration"],
        "auto_map": {
            "AutoConfig": "configuration_mineru_diffusion.MinerUDiffusionConfig",
            "AutoModel": "modeling_mineru_diffusion.MinerUDiffusionForConditionalGeneration",
            "AutoProcessor": "processing_mineru_diffusion.MinerUDiffusionProcessor",
        },
        "model_type": "mineru_diffusion",
        "text_config": {**TEXT, "vocab_size": ids["vocab"]},
        "vision_config": VISION,
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "mask_token_id": ids["<|MASK|>"],
        "vision_projector_type": "patch_merger2x",
        "vision_select_layer": -2,
        "image_size": 512,
        "patch_size": 16,
        "downsample_ratio": 0.5,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.57.1",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    state = diffusion_state(ids["vocab"], torch.Generator().manual_seed(0))
    if state_edit:
        state_edit(state, ids)
    write_shards(out, state)
    return out


# The scripted layout answer of write_layout_checkpoint (0-1000 units over the page).
LAYOUT_ANSWER = (  # the bundled courier-short.pdf's title, paragraph, bullet list and last line
    "<|box_start|>105 082 250 115<|box_end|><|ref_start|>title<|ref_end|><|rotate_up|>\n"
    "<|box_start|>105 120 885 208<|box_end|><|ref_start|>text<|ref_end|><|rotate_up|>\n"
    "<|box_start|>105 210 885 380<|box_end|><|ref_start|>list<|ref_end|><|rotate_up|>\n"
    "<|box_start|>105 383 885 432<|box_end|><|ref_start|>text<|ref_end|><|rotate_up|>\n"
)


def write_layout_checkpoint(out: Path, answer: str = LAYOUT_ANSWER, logit: float = 6.0) -> Path:
    """A tiny MinerU-Diffusion checkpoint whose layout answer is known, so that a two-stage parse
    finds real blocks: every layer's output projections are zero (attention and MLP add nothing),
    so a masked position's last hidden state is the MASK embedding whatever the page, and the head
    maps that state to one added token whose text is ``answer`` (at ``logit`` above the rest: a
    confidence under the release's 0.95 threshold, so each pass takes several denoising steps).
    The layout parse of any run of that token is ``answer``'s blocks (repeats are near-duplicates);
    the recognition passes read the same token."""

    def scripted(state, ids):
        for key in state:
            if key.endswith(("self_attn.o_proj.weight", "mlp.down_proj.weight")) and key.startswith("language_model"):
                state[key].zero_()
        e = state["language_model.model.embed_tokens.weight"][ids["<|MASK|>"]].float()
        h = state["language_model.model.norm.weight"].float() * e * torch.rsqrt(e.pow(2).mean() + TEXT["rms_norm_eps"])
        head = state["language_model.lm_head.weight"]
        rest = (head.float() @ h).max()
        head[ids[answer]] = ((rest + logit) * h / h.dot(h)).to(head.dtype)

    return write_diffusion_checkpoint(out, scripted, extra_tokens=(answer,))


def write_ar_checkpoint(out: Path) -> Path:
    """A tiny MinerU2.5-style Qwen2-VL checkpoint (tied lm_head, as 1.2B Qwen2 models have)."""
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    out.mkdir(parents=True, exist_ok=True)
    ids = write_tokenizer_files(out)
    torch.manual_seed(0)
    config = Qwen2VLConfig(
        text_config={
            "vocab_size": ids["vocab"],
            "hidden_size": 64,
            "intermediate_size": 96,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 4096,
            "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
            "tie_word_embeddings": True,
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
        },
        vision_config={k: v for k, v in VISION.items() if k != "model_type"},
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )
    model = Qwen2VLForConditionalGeneration(config)
    model.save_pretrained(str(out), max_shard_size="60KB")
    cfg = json.loads((out / "config.json").read_text())
    cfg["auto_map"] = {"AutoProcessor": "processing_mineru.MinerUProcessor"}  # must not trigger remote code
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    return out


# ---- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def diffusion_dir(tmp_path_factory) -> Path:
    return write_diffusion_checkpoint(tmp_path_factory.mktemp("mineru-diffusion-tiny"))


@pytest.fixture(scope="module")
def ar_dir(tmp_path_factory) -> Path:
    return write_ar_checkpoint(tmp_path_factory.mktemp("mineru25-tiny"))


@pytest.fixture(scope="module")
def page_png(tmp_path_factory) -> Path:
    img = Image.new("RGB", (200, 120), "white")
    draw = ImageDraw.Draw(img)
    draw.text((10, 20), "The quick brown fox", fill="black")
    draw.rectangle((10, 60, 180, 100), outline="black")
    path = tmp_path_factory.mktemp("page") / "page.png"
    img.save(path)
    return path


def _load(spec: Path, decoder: str):
    registry._cache.clear()  # each test sees its own directory contents
    return registry.load_backend(str(spec), decoder, device="cpu")


# ---- MinerU-Diffusion ---------------------------------------------------------------------------------


def test_checkpoint_layout_is_official(diffusion_dir):
    files = sorted(p.name for p in diffusion_dir.iterdir())
    assert "model.safetensors.index.json" in files and sum(f.endswith(".safetensors") for f in files) == 2
    assert not any(
        "merger" in k for k in json.loads((diffusion_dir / "model.safetensors.index.json").read_text())["weight_map"]
    )
    backend = _load(diffusion_dir, "diffusion")
    ids = json.loads((diffusion_dir / "config.json").read_text())
    tok = json.loads((diffusion_dir / "tokenizer.json").read_text())
    vocab = {t["content"]: t["id"] for t in tok["added_tokens"]}
    assert backend.mask_id == ids["mask_token_id"] == vocab["<|MASK|>"] != 151669
    assert backend.stop_ids == frozenset({vocab["<|endoftext|>"], vocab["<|im_end|>"]})
    assert backend.text.template_source == "chat_template.jinja"
    assert backend.device == torch.device("cpu") and next(backend.model.parameters()).dtype == torch.float32


def test_prompt_follows_chat_template(diffusion_dir, page_png):
    backend = _load(diffusion_dir, "diffusion")
    text = backend.text.render("\nText Recognition:")
    assert text == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        "<|vision_start|><|image_pad|><|vision_end|>\nText Recognition:<|im_end|>\n<|im_start|>assistant\n"
    )
    page = load_page(page_png)
    vision = backend.images(backend.images.region_image(page.image, backend.regions(page)[0]))
    ids = backend.text.prompt_ids("\nText Recognition:", vision.n_tokens)
    assert ids.count(backend.cfg.image_token_id) == vision.n_tokens == vision.grid_thw.prod().item() // 4
    assert (
        backend.text.detokenize(ids) == "system\nYou are a helpful assistant.\nuser\n\nText Recognition:\nassistant\n"
    )


@pytest.mark.parametrize("where", ["chat_template.json", "tokenizer_config.json", "fallback"])
def test_chat_template_sources(diffusion_dir, tmp_path, where):
    from models.mineru_common.text import ChatText

    for name in ("tokenizer.json", "config.json"):
        (tmp_path / name).write_bytes((diffusion_dir / name).read_bytes())
    if where == "chat_template.json":
        (tmp_path / where).write_text(json.dumps({"chat_template": QWEN2VL_TEMPLATE}))
    elif where == "tokenizer_config.json":
        (tmp_path / where).write_text(json.dumps({"chat_template": QWEN2VL_TEMPLATE}))
    text = ChatText(tmp_path, json.loads((tmp_path / "config.json").read_text()))
    assert text.template_source.startswith(where)
    assert text.render("\nText Recognition:").endswith(
        "<|vision_start|><|image_pad|><|vision_end|>\nText Recognition:<|im_end|>\n<|im_start|>assistant\n"
    )


def test_layout_pass_sees_1036_square_within_budget(diffusion_dir, page_png):
    from models.mineru_common.tasks import layout_region

    backend = _load(diffusion_dir, "diffusion")
    page = load_page(page_png)
    image = backend.images.region_image(page.image, layout_region(page.width, page.height))
    assert image.size == (1036, 1036)
    vision = backend.images(image)  # this tiny preprocessor caps at 48 tokens; the release's budget keeps 1369
    assert vision.n_tokens <= 48 and vision.size[0] == vision.size[1]


def _blockwise_and_dense(backend, page, L: int, n_blocks: int = 3, prefill_block: int | None = None):
    """Logits of ``n_blocks`` random blocks decoded through the cache (prefilled for block length
    ``prefill_block``, default ``L``), and the same blocks in one dense forward under the release's
    mask (prompt blocks of ``L`` aligned to the end of the prompt)."""
    model = backend.model
    region = backend.regions(page)[0]
    ctx = backend.encode(page, [region], block_length=prefill_block or L)
    gen = torch.Generator().manual_seed(L)
    blocks = [torch.randint(0, backend.cfg.text.vocab_size, (1, L), generator=gen) for _ in range(n_blocks)]
    blocks[1][0, L // 4 : 3 * L // 4] = backend.mask_id
    cached = []
    with torch.inference_mode():
        for block in blocks:
            cached.append(backend.block_logits(ctx, block, torch.tensor([0]))[0])
            backend.commit_block(ctx, block, torch.tensor([0]))
        vision = backend.images(backend.images.region_image(page.image, region))
        ids = torch.tensor(backend.text.prompt_ids(region.prompt, vision.n_tokens))
        x = torch.cat([model.prompt_embeds(ids, vision.pixel_values, vision.grid_thw)] + [model.embed(b) for b in blocks], 1)
        n, p = x.shape[1], len(ids)
        dense = model.logits(model.decoder(x, torch.arange(n), None, sdar_mask(p, n_blocks * L, L), store=False))
    assert ctx.cache.length == n
    return ctx, blocks, cached, dense[0, p:].view(n_blocks, L, -1)


@pytest.mark.parametrize("path", ["eager", "static"])
@pytest.mark.parametrize("L", [4, 8, 16, 32, 64])
def test_cached_blockwise_forward_equals_dense_release_mask(diffusion_dir, page_png, L, path):
    """Every block length: the prompt is prefilled in blocks of the decode's own length, aligned to
    its end, on the eager path and on the fixed-shape path CUDA graphs replay."""
    from models.mineru_diffusion.graphs import BlockGraphs

    backend = _load(diffusion_dir, "diffusion")
    backend.graphs = BlockGraphs(backend.model, use_graphs=False) if path == "static" else None
    try:
        ctx, blocks, cached, dense = _blockwise_and_dense(backend, load_page(page_png), L)
        assert ctx.prompt_len % L != 0 or L == 4  # end alignment matters for this prompt
        for j in range(len(blocks)):
            assert torch.allclose(cached[j], dense[j], atol=1e-4, rtol=1e-4), (L, j, (cached[j] - dense[j]).abs().max())
        if path == "eager":  # a denoising pass stores nothing: repeating it changes nothing
            with torch.inference_mode():
                length = ctx.cache.length
                again = backend.block_logits(ctx, blocks[0], torch.tensor([0]))
                assert ctx.cache.length == length
                assert torch.equal(again, backend.block_logits(ctx, blocks[0], torch.tensor([0])))
    finally:
        backend.graphs = None


def test_prefill_with_a_fixed_block_of_32_gives_other_logits_at_block_8(diffusion_dir, page_png):
    """The bug this guards against: a 32-token prefill under an 8-token decode."""
    backend = _load(diffusion_dir, "diffusion")
    page = load_page(page_png)
    _, _, right, dense = _blockwise_and_dense(backend, page, 8)
    _, _, wrong, _ = _blockwise_and_dense(backend, page, 8, prefill_block=32)
    assert torch.allclose(right[0], dense[0], atol=1e-4, rtol=1e-4)
    assert (wrong[0] - dense[0]).abs().max() > 1e-2


def test_trace_records_the_prefill_block(diffusion_dir, page_png):
    backend = _load(diffusion_dir, "diffusion")
    trace = decode_page(load_page(page_png), decoder="diffusion", backend=backend,
                        params=DecodeParams(block_length=8, steps=8, max_new_tokens=16))
    assert trace.params["prefill_block"] == 8 and trace.model.exec_mode == "eager" and trace.model.mask_id == backend.mask_id


def test_static_block_forward_matches_the_eager_path(diffusion_dir, page_png):
    """The fixed-shape forward that CUDA graphs replay (whole-capacity attention under a mask,
    writes at device-tensor slots, cache grown ahead) gives the eager path's logits and decode."""
    from models.mineru_diffusion.graphs import BlockGraphs

    backend = _load(diffusion_dir, "diffusion")
    page = load_page(page_png)
    region = backend.regions(page)[0]
    gen = torch.Generator().manual_seed(2)
    blocks = [torch.randint(0, backend.cfg.text.vocab_size, (1, 32), generator=gen) for _ in range(4)]
    blocks.append(blocks[0][:, :7])  # a short last block: its own shape
    runs = {}
    for name, graphs in (("eager", None), ("static", BlockGraphs(backend.model, use_graphs=False))):
        backend.graphs = graphs
        ctx = backend.encode(page, [region])
        logits, capacities = [], []
        with torch.inference_mode():
            for block in blocks:
                logits.append(backend.block_logits(ctx, block, torch.tensor([0])))
                backend.commit_block(ctx, block, torch.tensor([0]))
                capacities.append(ctx.cache.capacity)
        runs[name] = (logits, ctx.cache.length, capacities)
    eager, static = runs["eager"], runs["static"]
    assert eager[1] == static[1] == ctx.prompt_len + 4 * 32 + 7
    assert static[2][-1] > static[2][0] or static[2][0] >= static[1]  # the cache grew (or had room) ahead
    for a, b in zip(eager[0], static[0]):
        assert a.shape == b.shape
        assert torch.allclose(a, b, atol=1e-4, rtol=1e-4), (a - b).abs().max()
    # a whole decode runs through the static path and yields a valid trace (token-for-token
    # equality is not asserted: a random model's near-tied logits flip on 1e-6 differences)
    backend.graphs = BlockGraphs(backend.model, use_graphs=False)
    trace = decode_page(page, decoder="diffusion", backend=backend, params=DecodeParams(max_new_tokens=96))
    backend.graphs = None
    assert check_invariants(trace) == [] and trace.n_tokens > 0


def test_static_path_reuses_one_set_of_buffers_across_pages(diffusion_dir, page_png, tmp_path):
    """CUDA graphs point at fixed buffers, so a second page moves into the first page's buffers:
    its logits must still be its own, and the first page's cache must refuse to run on."""
    from models.mineru_diffusion.graphs import BlockGraphs

    backend = _load(diffusion_dir, "diffusion")
    other = Image.new("RGB", (240, 90), "white")
    ImageDraw.Draw(other).text((8, 30), "Pack my box with five dozen jugs", fill="black")
    other.save(tmp_path / "other.png")
    page_a, page_b = load_page(page_png), load_page(tmp_path / "other.png")
    block = torch.randint(0, backend.cfg.text.vocab_size, (1, 32), generator=torch.Generator().manual_seed(3))
    rows = torch.tensor([0])
    with torch.inference_mode():
        backend.graphs = None
        ctx = backend.encode(page_b, backend.regions(page_b))
        eager_b = backend.block_logits(ctx, block, rows)
        graphs = backend.graphs = BlockGraphs(backend.model, use_graphs=False)
        ctx_a = backend.encode(page_a, backend.regions(page_a))
        backend.block_logits(ctx_a, block, rows)
        backend.commit_block(ctx_a, block, rows)
        home = ctx_a.cache.k[0]
        ctx_b = backend.encode(page_b, backend.regions(page_b))
        static_b = backend.block_logits(ctx_b, block, rows)
        assert ctx_b.cache.k[0] is home and graphs.homes == 1  # moved in, not reallocated
        assert torch.allclose(static_b, eager_b, atol=1e-4, rtol=1e-4)
        assert ctx_a.cache.evicted
        with pytest.raises(RuntimeError, match="evicted"):
            backend.block_logits(ctx_a, block, rows)
    backend.graphs = None


def test_grown_cache_slots_are_zero(diffusion_dir, page_png):
    """Static forwards weigh masked slots by 0, and 0 x NaN is NaN: grown slots must be zeros."""
    backend = _load(diffusion_dir, "diffusion")
    page = load_page(page_png)
    ctx = backend.encode(page, backend.regions(page))
    cache, n = ctx.cache, ctx.cache.length
    cache.reserve(n + 4096)
    assert cache.capacity == n + 4096
    for k, v in zip(cache.k, cache.v):
        assert torch.count_nonzero(k[:, :, n:]) == 0 and torch.count_nonzero(v[:, :, n:]) == 0


def test_sdar_mask_rules():
    m = sdar_mask(prompt_len=5, gen_len=4, block_length=2)
    # prompt blocks aligned to the end: {0}, {1,2}, {3,4}; then generated blocks {5,6}, {7,8}
    assert m[0].tolist() == [True] + [False] * 8
    assert m[1].tolist() == [True] * 3 + [False] * 6
    assert m[3].tolist() == [True] * 5 + [False] * 4
    assert m[5].tolist() == [True] * 7 + [False] * 2
    assert m[8].all()


def test_meta_loading_keeps_vision_rope(diffusion_dir, page_png):
    backend = _load(diffusion_dir, "diffusion")
    page = load_page(page_png)
    vision = backend.images(backend.images.region_image(page.image, backend.regions(page)[0]))
    reference = MinerUDiffusion(backend.cfg)
    reference.load_state_dict(backend.model.state_dict())
    with torch.inference_mode():
        a = backend.model.image_features(vision.pixel_values, vision.grid_thw)
        b = reference.image_features(vision.pixel_values, vision.grid_thw)
    assert torch.isfinite(a).all() and torch.allclose(a, b, atol=1e-5)


def test_hub_cache_snapshot_with_symlinked_shards_loads(diffusion_dir, tmp_path):
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / "abc123"
    blobs.mkdir()
    snapshot.mkdir(parents=True)
    for i, f in enumerate(sorted(diffusion_dir.iterdir())):
        blob = blobs / f"blob{i}"
        blob.write_bytes(f.read_bytes())
        (snapshot / f.name).symlink_to(blob)
    assert (
        _load(snapshot, "diffusion").mask_id == json.loads((diffusion_dir / "config.json").read_text())["mask_token_id"]
    )


def test_pickle_only_checkpoint_is_refused(diffusion_dir, tmp_path):
    bad = tmp_path / "pickled"
    bad.mkdir()
    for f in diffusion_dir.iterdir():
        if not f.name.startswith("model"):
            (bad / f.name).write_bytes(f.read_bytes())
    (bad / "pytorch_model.bin").write_bytes(b"not opened")
    with pytest.raises(ModelLoadError, match="pickle"):
        _load(bad, "diffusion")


def test_strict_load_names_offending_keys(tmp_path):
    def edit(state, ids):
        del state["language_model.model.layers.1.self_attn.q_norm.weight"]
        state["vision_model.merger.mlp.0.weight"] = torch.zeros(4, 4, dtype=torch.bfloat16)

    bad = write_diffusion_checkpoint(tmp_path / "bad", edit)
    with pytest.raises(ModelLoadError) as err:
        _load(bad, "diffusion")
    msg = str(err.value)
    assert "language_model.model.layers.1.self_attn.q_norm.weight" in msg
    assert "vision_model.merger.mlp.0.weight" in msg and "\n" not in msg


def test_diffusion_decodes_into_valid_trace(diffusion_dir, page_png):
    backend = _load(diffusion_dir, "diffusion")
    params = DecodeParams(max_new_tokens=64, threshold=0.5)
    trace = decode_page(load_page(page_png), decoder="diffusion", params=params, backend=backend)
    assert check_invariants(trace) == []
    assert trace.model.name == "mineru-diffusion" and len(trace.regions) == 1
    assert trace.regions[0].kind == "page" and trace.regions[0].n_generated in (32, 64)
    assert Trace.loads(trace.to_json()).text == trace.text


def test_two_stage_parse_merges_layout_and_blocks(diffusion_dir, page_png):
    from models.mineru_common.tasks import layout_region
    from mudiff_viz.decoding.diffusion import decode_diffusion
    from mudiff_viz.decoding.sequential import decode_sequential

    backend = _load(diffusion_dir, "diffusion")
    page = load_page(page_png)
    params = DecodeParams(max_new_tokens=32, threshold=0.5)
    layout_trace = decode_diffusion(backend, page, [layout_region(page.width, page.height)], params)
    answer = (
        "<|box_start|>050 100 900 300<|box_end|><|ref_start|>title<|ref_end|><|rotate_up|>\n"
        "<|box_start|>050 500 900 850<|box_end|><|ref_start|>table<|ref_end|><|rotate_up|>\n"
        "<|box_start|>100 870 300 990<|box_end|><|ref_start|>image<|ref_end|><|rotate_up|>"
    )
    blocks = parse_layout(answer, page.width, page.height)
    trace = decode_sequential(
        backend, page, blocks, decode_diffusion, params, before=[layout_trace], extra_params={"mode": "layout"}
    )
    assert check_invariants(trace) == []
    assert [r.kind for r in trace.regions] == ["layout", "title", "table", "image"]
    assert trace.regions[2].bbox == [10.0, 60.0, 180.0, 102.0] and trace.regions[3].tokens == []
    by_region = {s.region for s in trace.steps}
    assert by_region == {0, 1, 2}
    first_of = {r: min(s.forward for s in trace.steps if s.region == r) for r in by_region}
    assert first_of[0] == 0 < first_of[1] < first_of[2]  # back to back on one clock
    assert trace.metrics["nfe"] == sum(len(t.steps) for t in [trace]) + trace.metrics["commit_passes"]
    assert trace.params["n_regions"] == 4 and trace.params["mode"] == "layout"
    # the pipeline's layout mode runs the same path end to end (random weights: few or no blocks)
    full = decode_page(page, decoder="diffusion", params=params, backend=backend, mode="layout")
    assert check_invariants(full) == [] and full.regions[0].kind == "layout"
    assert full.params["layout_prompt"] == "detection"


@pytest.mark.parametrize("wording, text", [("detection", "Layout Detection:"), ("analysis", "Layout Analysis:")])
def test_layout_prompt_wordings_reach_the_model(diffusion_dir, page_png, wording, text):
    from models.mineru_common.tasks import layout_region

    backend = _load(diffusion_dir, "diffusion")
    region = layout_region(100, 100, wording)
    ids = backend.text.prompt_ids(region.prompt, 4)
    assert text in backend.text.tok.decode(ids)
    trace = decode_page(load_page(page_png), decoder="diffusion", backend=backend, mode="layout",
                        layout_prompt=wording, params=DecodeParams(max_new_tokens=16))
    assert trace.params["layout_prompt"] == wording


def test_exif_orientation_6_jpeg_gives_the_upright_image_grid(diffusion_dir, tmp_path):
    """A phone photo stored sideways with orientation 6 is read upright: wide, not tall."""
    upright = Image.new("RGB", (672, 336), "white")
    ImageDraw.Draw(upright).text((20, 150), "upright text", fill="black")
    exif = Image.Exif()
    exif[0x0112] = 6
    path = tmp_path / "phone.jpg"
    upright.transpose(Image.Transpose.ROTATE_90).save(path, exif=exif.tobytes())  # stored 336 x 672
    page = load_page(path)
    assert page.image.size == (672, 336) and page.info()["exif_orientation"] == 6
    backend = _load(diffusion_dir, "diffusion")
    vision = backend.images(backend.images.region_image(page.image, backend.regions(page)[0]))
    _, h, w = vision.grid_thw[0].tolist()
    assert w > h  # [1, 24, 48]-like, not the sideways [1, 48, 24]
    trace = decode_page(page, decoder="diffusion", backend=backend, params=DecodeParams(max_new_tokens=8))
    assert trace.page.exif_orientation == 6


# ---- MinerU2.5 (AR) ---------------------------------------------------------------------------------


def test_ar_checkpoint_decodes_into_valid_trace(ar_dir, page_png):
    files = [p.name for p in ar_dir.iterdir()]
    assert "model.safetensors.index.json" in files
    backend = _load(ar_dir, "ar")
    assert backend.model.lm_head.weight.data_ptr() == backend.model.get_input_embeddings().weight.data_ptr()
    trace = decode_page(load_page(page_png), decoder="ar", params=DecodeParams(max_new_tokens=12), backend=backend)
    assert check_invariants(trace) == []
    assert trace.decoder == "ar" and trace.model.name == "mineru2.5"
    assert 1 <= len(trace.regions[0].tokens) <= 12


def test_ar_cached_steps_match_full_forward(ar_dir, page_png):
    backend = _load(ar_dir, "ar")
    page = load_page(page_png)
    region = backend.regions(page)[0]
    with torch.inference_mode():
        ctx = backend.encode(page, [region])
        steps = [backend.first_logits(ctx)]
        tokens = [3, 17, 42]
        for t in tokens:
            steps.append(backend.next_logits(ctx, torch.tensor([t]), torch.tensor([0])))
        vision = backend.images(backend.images.region_image(page.image, region))
        ids = backend.text.prompt_ids(region.prompt, vision.n_tokens) + tokens
        input_ids = torch.tensor([ids])
        kinds = (input_ids == backend.text.ids.image_pad).int()
        full = backend.model(
            input_ids=input_ids,
            pixel_values=vision.pixel_values,
            image_grid_thw=vision.grid_thw,
            mm_token_type_ids=kinds,
        ).logits[0, -4:]
    for j in range(4):
        assert torch.allclose(steps[j][0], full[j], atol=1e-4, rtol=1e-4)


# ---- CLI -----------------------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("MUDIFF_ALLOW_HUB", None)
    return subprocess.run(
        [sys.executable, "-m", "mudiff_viz", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("kind", ["diffusion", "ar"])
def test_cli_decodes_with_checkpoint_dir(kind, diffusion_dir, ar_dir, page_png, tmp_path):
    model_dir = diffusion_dir if kind == "diffusion" else ar_dir
    out = tmp_path / "t.json"
    res = _cli(
        "decode",
        str(page_png),
        "--model",
        str(model_dir),
        "--decoder",
        kind,
        "--max-new-tokens",
        "32",
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    trace = Trace.load(out)
    assert check_invariants(trace) == [] and trace.decoder == kind


def test_glyph_anchoring_is_the_nano_pairs_own_knob(diffusion_dir, page_png, tmp_path):
    """MinerU-Diffusion has no glyph anchoring: asking for a reach is one line and a non-zero exit,
    and its traces do not record the knob (docs/trace.md: ``anchor_reach`` for models that have it)."""
    refused = _cli("decode", str(page_png), "--model", str(diffusion_dir), "--anchor-reach", "2",
                   "--max-new-tokens", "8", "--out", str(tmp_path / "no.json"))
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1, refused.stderr
    assert "glyph anchoring" in refused.stderr and "-1" in refused.stderr
    out = tmp_path / "t.json"
    ok = _cli("decode", str(page_png), "--model", str(diffusion_dir), "--max-new-tokens", "8", "--out", str(out))
    assert ok.returncode == 0, ok.stderr
    assert "anchor_reach" not in Trace.load(out).params


def test_cli_hub_id_offline_is_one_line_exit_3(page_png, tmp_path):
    res = _cli(
        "decode",
        str(page_png),
        "--model",
        "opendatalab/MinerU-Diffusion-V1-0320-2.5B",
        "--out",
        str(tmp_path / "t.json"),
    )
    assert res.returncode == 3
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("error: ")


def test_a_mineru25_config_that_disagrees_with_its_weights_is_one_line_exit_3(ar_dir, page_png, tmp_path):
    """transformers' own answer is a 20-line load report and "look at the above report!": the loader
    says it in one line instead, naming a tensor and both shapes."""
    bad = _edited_copy(ar_dir, tmp_path / "bad", config_edit=lambda c: c["text_config"].__setitem__("intermediate_size", 128))
    res = _cli("decode", str(page_png), "--model", str(bad), "--decoder", "ar", "--max-new-tokens", "8",
               "--out", str(tmp_path / "t.json"))
    assert res.returncode == 3 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("error: checkpoint bad does not match its config: 6 tensors of another shape, first "
                                 "model.language_model.layers.0.mlp.down_proj.weight (64, 96) in the weights, (64, 128) "
                                 "from config.json"), res.stderr
    assert "LOAD REPORT" not in res.stderr and "above report" not in res.stderr


# ---- layout parser -------------------------------------------------------------------------------------


def test_layout_parser_well_formed():
    text = (
        "<|box_start|>100 200 500 400<|box_end|><|ref_start|>text<|ref_end|><|rotate_up|>\n"
        "<|box_start|>600 100 100 050<|box_end|><|ref_start|>equation<|ref_end|><|rotate_right|>\n"
        "<|box_start|>0 0 1000 1000<|box_end|><|ref_start|>image<|ref_end|><|rotate_up|>"
    )
    regions = parse_layout(text, width=2000, height=1000)
    assert [r.kind for r in regions] == ["text", "equation", "image"]
    assert regions[0].bbox == (200.0, 200.0, 1000.0, 400.0) and regions[0].prompt == "\nText Recognition:"
    assert regions[1].bbox == (200.0, 50.0, 1200.0, 100.0)  # corners swapped into order
    assert regions[1].prompt == "\nFormula Recognition:" and regions[1].meta["angle"] == 90
    assert regions[2].prompt is None and regions[2].meta["skip"]


def test_layout_parser_skips_malformed_lines():
    text = "\n".join(
        [
            "<|box_start|>10 20 30<|box_end|><|ref_start|>text<|ref_end|>",  # three numbers
            "<|box_start|>10 20 30 1200<|box_end|><|ref_start|>text<|ref_end|>",  # outside 0-1000
            "<|box_start|>10 20 10 50<|box_end|><|ref_start|>text<|ref_end|>",  # empty box
            "garbage <|box_end|> text",
            "<|box_start|>a b c d<|box_end|><|ref_start|>text<|ref_end|>",
            "",
            "<|box_start|>10 20 30 40<|box_end|><|ref_start|>table<|ref_end|><|rotate_up|>"
            "<|box_start|>50 60 70 80<|box_end|><|ref_start|>title<|ref_end|>",  # two on one line
        ]
    )
    regions = parse_layout(text, 1000, 1000)
    assert [(r.kind, r.bbox) for r in regions] == [
        ("table", (10.0, 20.0, 30.0, 40.0)),
        ("title", (50.0, 60.0, 70.0, 80.0)),
    ]
    assert regions[0].prompt == "\nTable Recognition:" and parse_layout("", 10, 10) == []


# ---- GPU check script --------------------------------------------------------------------------------------


def test_gpu_check_script_runs_tiny_on_cpu(tmp_path):
    """Every path of the GPU check on tiny random models: eager and graph-ready forwards, the eager
    and fused loops, one-token steps, the memory floor, parity at block 8 and 32, and MinerU2.5's
    dynamic and static caches."""
    out = tmp_path / "gpu.json"
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--tiny", "--blocks", "2", "--repeats", "1",
         "--ar-tokens", "12", "--out", str(out)],
        cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=180,
    )
    assert res.returncode == 0, res.stderr
    report = json.loads(out.read_text())
    assert report["device"] == "cpu" and report["tiny"] is True and report["copy_bandwidth_gb_s"] > 0
    diff = report["mineru_diffusion"]
    assert diff["step_weight_bytes"] > 0 and diff["floor_ms_per_step"] > 0
    for mode in ("eager", "static"):
        r = diff[mode]
        assert r["fused_tokens_equal_eager"] is True
        assert r["loop_fused_32"]["tokens"] == r["loop_eager_32"]["tokens"] == 64
        assert r["loop_fused_32"]["x_floor"] > 1 and r["loop_fused_1_token"]["tokens"] == 64
        assert r["threshold_0_whole_block"]["forwards"] == 4  # a block per forward, plus its commit forward
        assert "recording_overhead" in r
    assert [p["block_length"] for p in diff["logit_parity"]] == [8, 32]
    assert all(p["argmax_agreement"] == 1.0 for p in diff["logit_parity"])
    ar = report["mineru25"]
    assert ar["eager"]["tokens"] == ar["static-cache"]["tokens"] == 12 and ar["static-cache"]["tokens_equal_eager"]


def test_token_texts_keep_split_characters_whole(diffusion_dir):
    """Byte-level BPE can spread one character over several tokens: the trace must not show U+FFFD."""
    backend = _load(diffusion_dir, "diffusion")
    ids = backend.text.tok.encode("é漢x", add_special_tokens=False).ids
    texts = backend.token_texts(ids)
    assert "".join(texts) == "é漢x"
    assert all("\ufffd" not in t for t in texts)
    assert len(texts) == len(ids)


def test_cli_layout_mode(diffusion_dir, page_png, tmp_path):
    """The two-stage parse from the command line: a valid trace whatever the random layout says."""
    out = tmp_path / "t.json"
    r = _cli("decode", str(page_png), "--model", str(diffusion_dir), "--mode", "layout", "--max-new-tokens", "32",
             "--out", str(out))
    assert r.returncode == 0, r.stderr
    from mudiff_viz.core.trace import Trace, check_invariants

    assert check_invariants(Trace.load(out)) == []


def test_cli_layout_mode_refused_for_nano(page_png, tmp_path):
    from models.registry import NANO_DIR, SHIPPED

    if not (NANO_DIR / f"{SHIPPED['nano']}-diffusion" / "model.safetensors").exists():
        pytest.skip("nano weights not in assets/models")
    r = _cli("decode", str(page_png), "--mode", "layout", "--out", str(tmp_path / "t.json"))
    assert r.returncode == 2 and "layout" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("path", ["eager", "static"])
def test_fused_loop_equals_eager_on_the_tiny_checkpoint(diffusion_dir, page_png, path):
    """The fused denoising step (forward + scheduler through backend.captured_step, no per-step host
    check) gives the eager loop's tokens, step maps and trace, on both forward paths."""
    from models.mineru_diffusion.graphs import BlockGraphs
    from tests.test_fused import timeless

    backend = _load(diffusion_dir, "diffusion")
    page = load_page(page_png)
    traces = {}
    try:
        for fused in (False, True):
            backend.graphs = BlockGraphs(backend.model, use_graphs=False) if path == "static" else None
            params = DecodeParams(block_length=8, steps=8, threshold=0.3, max_new_tokens=32, fused=fused)
            traces[fused] = decode_page(page, decoder="diffusion", backend=backend, params=params)
    finally:
        backend.graphs = None
    assert timeless(traces[True]) == timeless(traces[False])
    assert check_invariants(traces[True]) == [] and traces[True].n_tokens > 0


def test_a_mask_predicting_head_gives_one_trace_on_the_tiny_checkpoint(tmp_path, page_png):
    """A checkpoint whose MASK row makes MASK the likeliest token at many positions: blocks reach
    the step limit and force-commit; eager and fused loops (plain and static forwards) agree."""
    from models.mineru_diffusion.graphs import BlockGraphs
    from tests.test_fused import timeless

    def mask_heavy(state, ids):
        head = state["language_model.lm_head.weight"]
        head[SPECIALS.index("<|MASK|>")] = -head.sum(0)  # measured: MASK wins everywhere until the limit

    backend = _load(write_diffusion_checkpoint(tmp_path / "masky", state_edit=mask_heavy), "diffusion")
    page = load_page(page_png)
    traces = {}
    for path in ("eager", "static"):
        for fused in (False, True):
            backend.graphs = BlockGraphs(backend.model, use_graphs=False) if path == "static" else None
            params = DecodeParams(block_length=8, steps=4, threshold=0.5, max_new_tokens=32, fused=fused)
            traces[path, fused] = decode_page(page, decoder="diffusion", backend=backend, params=params)
    for path in ("eager", "static"):  # the two forward paths differ in the last bits; each loop pair must not
        eager, fused = traces[path, False], traces[path, True]
        assert sum(s.forced for s in eager.steps) > 0
        assert timeless(fused) == timeless(eager) and eager.clock_length == fused.clock_length
        assert check_invariants(eager) == [] and check_invariants(fused) == []


def test_ar_static_cache_gives_the_dynamic_caches_tokens(ar_dir, page_png):
    """MinerU2.5's static-cache loop (what the CUDA graph replays on a GPU) decodes the same tokens
    as transformers' dynamic cache, page after page through one reused cache."""
    from models.mineru25.backend import MinerU25Backend
    from tests.test_fused import timeless

    dynamic = _load(ar_dir, "ar")
    static = MinerU25Backend(ar_dir, device="cpu", exec_mode="static-cache")
    assert dynamic.exec_mode == "eager" and static.exec_mode == "static-cache"
    other = Image.new("RGB", (180, 60), "white")
    ImageDraw.Draw(other).text((5, 20), "another page", fill="black")
    pages = [load_page(page_png), Image.new("RGB", (1, 1))]
    pages[1] = load_page(_png_bytes(other))
    params = DecodeParams(max_new_tokens=12)
    for page in pages:
        a = decode_page(page, decoder="ar", backend=dynamic, params=params)
        b = decode_page(page, decoder="ar", backend=static, params=params)
        da, db = timeless(a), timeless(b)
        da["model"].pop("exec_mode"), db["model"].pop("exec_mode")
        assert da == db and b.model.exec_mode == "static-cache"
    with pytest.raises(ModelLoadError, match="cuda-graphs needs CUDA"):
        MinerU25Backend(ar_dir, device="cpu", exec_mode="cuda-graphs")


def _png_bytes(image) -> bytes:
    import io

    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def test_probes_run_on_the_tiny_real_layout_checkpoints(diffusion_dir, ar_dir, tmp_path):
    """Occlusion and degradation through the CLI's decode and shuffle-bench on MinerU-Diffusion and
    MinerU2.5 layouts: the probed page reaches the model, the trace records what was changed, and the
    bench reports recovery beside CER on the rest."""
    from mudiff_viz.inputs import synth

    doc = synth.documents("test")[3]
    src = tmp_path / "page.pdf"
    src.write_bytes(synth.make_page(doc.paragraphs[:1], synth.PageStyle(font="times", size=12)).pdf)
    for kind, model_dir in (("diffusion", diffusion_dir), ("ar", ar_dir)):
        out = tmp_path / f"{kind}.json"
        res = _cli("decode", str(src), "--model", str(model_dir), "--decoder", kind, "--max-new-tokens", "16",
                   "--occlude", "0.2", "--degrade", "dpi=72,blur=1", "--probe-seed", "5", "--out", str(out), "--quiet")
        assert res.returncode == 0, res.stderr
        trace = Trace.load(out)
        assert check_invariants(trace) == [] and trace.decoder == kind
        assert trace.page.occluded and all(o.text for o in trace.page.occluded)
        assert trace.page.probes["degrade"] == {"dpi": 72.0, "blur": 1.0} or trace.page.probes["degrade"]["dpi"] == 72
    bench = tmp_path / "bench"
    res = _cli("shuffle-bench", str(src), "--levels", "0", "--occlude", "0,0.2", "--seeds", "1", "--model",
               f"diffusion={diffusion_dir},ar={ar_dir}", "--max-new-tokens", "16", "--out", str(bench))
    assert res.returncode == 0, res.stderr
    rows = json.loads((bench / "results.json").read_text())
    assert {r["decoder"] for r in rows} == {"diffusion", "ar"}
    assert all(r["recovery_rate"] is not None for r in rows if r["occlusion"])


# ---- the mask token id (config.json, else the tokenizer's <|MASK|>) ------------------------------------


def _edited_copy(src: Path, dst: Path, config_edit=None, rename_mask: bool = False) -> Path:
    """A copy of a checkpoint with config.json edited, and optionally no <|MASK|> in its tokenizer."""
    import shutil

    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    if config_edit:
        config_edit(config)
    (dst / "config.json").write_text(json.dumps(config))
    if rename_mask:
        tok = json.loads((dst / "tokenizer.json").read_text())
        for added in tok["added_tokens"]:
            if added["content"] == "<|MASK|>":
                added["content"] = "<|unused_0|>"
        vocab = tok["model"]["vocab"]
        vocab["<|unused_0|>"] = vocab.pop("<|MASK|>")
        (dst / "tokenizer.json").write_text(json.dumps(tok))
    return dst


def test_a_config_without_mask_token_id_takes_the_tokenizers_mask(diffusion_dir, tmp_path, page_png):
    config = json.loads((diffusion_dir / "config.json").read_text())
    bare = _edited_copy(diffusion_dir, tmp_path / "bare", lambda c: c.pop("mask_token_id"))
    backend = _load(bare, "diffusion")
    assert backend.mask_id == config["mask_token_id"] == SPECIALS.index("<|MASK|>")
    trace = decode_page(load_page(page_png), decoder="diffusion", backend=backend, params=DecodeParams(max_new_tokens=8))
    assert trace.model.mask_id == backend.mask_id and check_invariants(trace) == []


@pytest.mark.parametrize("case, edit, rename, message", [
    ("disagree", lambda c: c.update(mask_token_id=c["mask_token_id"] - 1), False,
     r"config.json mask_token_id=11 but the tokenizer maps <\|MASK\|> to 12"),
    ("image id", lambda c: c.update(mask_token_id=c["image_token_id"]), True,
     r"the mask token id 5 is also the image token id"),
    ("other special", lambda c: c.update(mask_token_id=2), True, r"mask token id 2 is also the id of <\|im_end\|>"),
    ("nowhere", lambda c: c.pop("mask_token_id"), True, r"no mask_token_id and the tokenizer has no <\|MASK\|>"),
    ("not an int", lambda c: c.update(mask_token_id="12"), False, r"mask_token_id must be an integer"),
    ("ordinary token", lambda c: c.update(mask_token_id=100), True,
     r"config.json mask_token_id=100 is the ordinary token '.+' and the tokenizer has no <\|MASK\|> token"),
    ("past the vocabulary", lambda c: c.update(mask_token_id=100_000), True,
     r"mask_token_id=100000 is no token of the tokenizer"),
    ("image ids disagree", lambda c: c.update(image_token_id=c["image_token_id"] + 1), False,
     r"image_token_id=6 but the tokenizer maps <\|image_pad\|> to 5"),
])
def test_mask_and_image_ids_that_disagree_or_collide_are_refused(diffusion_dir, tmp_path, case, edit, rename, message):
    bad = _edited_copy(diffusion_dir, tmp_path / "bad", edit, rename)
    with pytest.raises(ModelLoadError, match=message) as err:
        _load(bad, "diffusion")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("layers, message", [
    (3, r"config.json text_config num_hidden_layers=3 but layer_types lists 2 layers"),
    (0, r"config.json text_config num_hidden_layers must be a positive integer, got 0"),
])
def test_a_mineru25_config_with_a_wrong_layer_count_is_refused_in_one_line(ar_dir, tmp_path, layers, message):
    bad = _edited_copy(ar_dir, tmp_path / "bad", lambda c: c["text_config"].update(num_hidden_layers=layers))
    with pytest.raises(ModelLoadError, match=message) as err:
        _load(bad, "ar")
    assert "\n" not in str(err.value) and "StrictDataclass" not in str(err.value)


@pytest.mark.parametrize("exec_mode, device, env, choice", [
    ("cuda-graphs", "cuda", None, "on"),
    ("eager", "cuda", "0", "off: MUDIFF_CUDA_GRAPHS=0"),
    ("eager", "cuda", None, "off: eager"),
    ("eager", "cpu", None, "off: no CUDA"),
])
def test_the_cuda_graphs_choice_names_why(monkeypatch, exec_mode, device, env, choice):
    from models.mineru_common.device import graphs_choice

    if env is None:
        monkeypatch.delenv("MUDIFF_CUDA_GRAPHS", raising=False)
    else:
        monkeypatch.setenv("MUDIFF_CUDA_GRAPHS", env)
    assert graphs_choice(exec_mode, torch.device(device)) == choice


def test_a_real_model_trace_records_the_cuda_graphs_choice(diffusion_dir, page_png):
    backend = _load(diffusion_dir, "diffusion")
    trace = decode_page(load_page(page_png), decoder="diffusion", backend=backend, params=DecodeParams(max_new_tokens=8))
    assert trace.params["cuda_graphs"] == "off: no CUDA" and trace.model.exec_mode == "eager"


# ---- the release-settings preset ---------------------------------------------------------------------


def test_release_preset_from_the_cli_and_the_notebook(diffusion_dir, page_png, tmp_path):
    """--preset release / preset="release": the release's demo values under the flags given."""
    from mudiff_viz.notebook.api import decode

    out = tmp_path / "t.json"
    res = _cli("decode", str(page_png), "--model", str(diffusion_dir), "--preset", "release", "--max-new-tokens", "16",
               "--out", str(out))
    assert res.returncode == 0, res.stderr
    release = {"temperature": 1.0, "block_length": 32, "steps": 32, "threshold": 0.95, "max_new_tokens": 16}
    params = Trace.load(out).params
    assert {k: params[k] for k in release} == release
    registry._cache.clear()
    nb = decode(str(page_png), model=str(diffusion_dir), preset="release", max_new_tokens=16, seed=3)
    assert {k: nb.params[k] for k in release} == release and nb.params["seed"] == 3
    ours = decode(str(page_png), model=str(diffusion_dir), max_new_tokens=16)
    assert ours.params["temperature"] == 0.0
    res = _cli("decode", str(page_png), "--model", str(diffusion_dir), "--preset", "fast", "--out", str(out))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1


def test_cli_layout_mode_writes_the_page_document(diffusion_dir, page_png, tmp_path):
    doc = tmp_path / "page.md"
    r = _cli("decode", str(page_png), "--model", str(diffusion_dir), "--mode", "layout", "--max-new-tokens", "16",
             "--out", str(tmp_path / "t.json"), "--document", str(doc))
    assert r.returncode == 0, r.stderr
    from models.mineru_common.content import trace_document

    trace = Trace.load(tmp_path / "t.json")
    assert doc.read_text() == trace_document(trace) and "layout_continues" in trace.params
    r = _cli("decode", str(page_png), "--model", str(diffusion_dir), "--max-new-tokens", "8",
             "--out", str(tmp_path / "u.json"), "--document", str(doc))
    assert r.returncode == 2 and "--document needs --mode layout" in r.stderr


RULES_ANSWER = (  # a header, a list and its near-identical item, a page number
    "<|box_start|>105 020 885 050<|box_end|><|ref_start|>header<|ref_end|><|rotate_up|>\n"
    "<|box_start|>105 210 885 380<|box_end|><|ref_start|>list<|ref_end|><|rotate_up|>\n"
    "<|box_start|>105 210 885 379<|box_end|><|ref_start|>text<|ref_end|><|rotate_up|>\n"
    "<|box_start|>450 950 550 980<|box_end|><|ref_start|>page_number<|ref_end|><|rotate_up|>\n"
)


def test_layout_rules_decide_the_blocks_and_the_page_document(tmp_path, page_png):
    """A checkpoint whose layout answer is scripted, decoded in layout mode under both rule sets: the trace
    records the rules, and its page document follows them."""
    from models.mineru_common.content import trace_document

    backend = _load(write_layout_checkpoint(tmp_path / "ckpt", RULES_ANSWER), "diffusion")
    page = load_page(page_png)
    knobs = {"block_length": 4, "steps": 4, "max_new_tokens": 4}
    client = decode_page(page, decoder="diffusion", backend=backend, mode="layout", params=DecodeParams.from_knobs(**knobs))
    assert client.params["layout_rules"] == "mineru-vl-utils" and check_invariants(client) == []
    assert [r.kind for r in client.regions] == ["layout", "header", "list", "text", "page_number"]  # the item stays
    assert client.params["region_tasks"] == ["layout", "text", None, "text", "text"]
    read = [r.text for r in client.regions[1:] if r.text]
    assert len(read) == 3 and trace_document(client) == "\n\n".join(read)  # header and page number stay
    release = decode_page(page, decoder="diffusion", backend=backend, mode="layout",
                          params=DecodeParams.from_knobs(layout_rules="release", **knobs))
    kinds = [r.kind for r in release.regions[1:]]
    assert release.params["layout_rules"] == "release" and check_invariants(release) == []
    assert len(kinds) % 4 == 0 and kinds[:4] == ["header", "list", "text", "page_number"]  # repeats are kept
    assert kinds == kinds[:4] * (len(kinds) // 4) and None not in release.params["region_tasks"]  # lists read too
    body = [r.text.strip() for r in release.regions[1:] if r.kind in ("list", "text") and r.text.strip()]
    assert body and trace_document(release) == "\n\n".join(body)  # header and page number left out


# ---- mode, task and per-task token limits (knobs) ------------------------------------------------------


@pytest.mark.parametrize("task, kind, prompt", [("table", "table", "Table Recognition:"),
                                                ("formula", "formula", "Formula Recognition:"),
                                                ("layout", "layout", "Layout Detection:")])
def test_the_task_knob_reads_the_page_with_that_prompt(diffusion_dir, page_png, task, kind, prompt):
    backend = _load(diffusion_dir, "diffusion")
    page = load_page(page_png)
    trace = decode_page(page, decoder="diffusion", backend=backend, params=DecodeParams.from_knobs(task=task,
                                                                                                    max_new_tokens=8))
    assert trace.params["task"] == task and trace.regions[0].kind == kind and check_invariants(trace) == []
    region = backend.task_region(page, task)
    assert prompt in backend.text.tok.decode(backend.text.prompt_ids(region.prompt, 4))


def test_a_nano_like_model_reads_text_only(page_png):
    from mudiff_viz.core.errors import UserInputError
    from tests.fixed_backend import FixedBackend, FixedPage

    with pytest.raises(UserInputError, match="reads text only: the table task needs a MinerU model"):
        decode_page(FixedPage(), decoder="diffusion", backend=FixedBackend(n_rows=1),
                    params=DecodeParams.from_knobs(task="table", max_new_tokens=8))
    with pytest.raises(UserInputError, match="layout mode needs a model with a layout prompt"):
        decode_page(FixedPage(), decoder="diffusion", backend=FixedBackend(n_rows=1),
                    params=DecodeParams.from_knobs(mode="layout", max_new_tokens=8))


def test_the_mode_knob_runs_the_two_stage_parse_with_per_task_limits(ar_dir, page_png):
    from mudiff_viz.decoding.two_stage import pass_params

    backend = _load(ar_dir, "ar")
    trace = decode_page(load_page(page_png), decoder="ar", backend=backend,
                        params=DecodeParams.from_knobs(mode="layout", max_new_tokens=20))
    assert trace.params["mode"] == "layout" and trace.params["task_tokens"]["layout"] == 20
    assert trace.regions[0].kind == "layout" and trace.regions[0].n_generated <= 20 and check_invariants(trace) == []
    release = DecodeParams.from_knobs(max_new_tokens=4096)
    assert [pass_params(backend, release, t).max_new_tokens for t in ("layout", "table", "text", "formula")] == [
        4096] * 4  # MinerU2.5's client sets no per-task limit (tests/test_shipped.py: MinerU-Diffusion's)
    assert pass_params(backend, DecodeParams.from_knobs(max_new_tokens=300), "layout").max_new_tokens == 300
