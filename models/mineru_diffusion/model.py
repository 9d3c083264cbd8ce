"""MinerU-Diffusion, natively: Qwen2-VL vision tower -> patch-merger projector -> SDAR decoder.

Written from the release's public facts (docs/real-models.md), so every forward the decoders make is ours
(no remote code, no ``generate``). Module and parameter names follow the official state dict
exactly, so ``load_state_dict(strict=True)`` maps the checkpoint one to one:

- ``vision_model``: transformers' ``Qwen2VisionTransformerPretrainedModel`` with its ``merger``
  replaced by identity (one 1280-d state per 14 x 14 patch; the last layer is used).
- ``vision_abstractor.projection``: "patch_merger2x": LayerNorm ``ln_q`` -> 4 neighbouring patches
  viewed as one 5120-d vector -> ``mlp.0`` -> GELU (erf) -> ``mlp.2`` to the decoder width.
- ``language_model.model``: SDAR (Qwen3-style): per-head RMSNorm on q and k before RoPE, GQA,
  SwiGLU, 1-D RoPE over plain ``arange`` positions with ``inv_freq`` computed on every call (never
  stored: the transformers 5 trap of uninitialised buffers cannot happen), untied ``lm_head``.

The decoder has no built-in causal mask: the caller passes one. The prompt is prefilled
block-causally in blocks aligned to the END of the prompt; each generated block sees the prompt,
all earlier blocks, and itself bidirectionally (:func:`sdar_mask`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from mudiff_viz.core.errors import ModelLoadError

# ---- configuration -------------------------------------------------------------------------------


def _pick(cls, data: dict) -> dict:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass
class SDARConfig:
    """The decoder (config.json ``text_config``, model_type "sdar"); defaults are the 2.5B model."""

    vocab_size: int = 151936
    hidden_size: int = 2048
    intermediate_size: int = 6144
    num_hidden_layers: int = 28
    num_attention_heads: int = 16
    num_key_value_heads: int = 8
    head_dim: int = 128
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    hidden_act: str = "silu"
    attention_bias: bool = False
    tie_word_embeddings: bool = False

    @classmethod
    def from_dict(cls, data: dict) -> SDARConfig:
        cfg = cls(**_pick(cls, data))
        if data.get("rope_scaling"):
            raise ModelLoadError(
                f"text_config.rope_scaling={data['rope_scaling']!r} is not supported (plain RoPE only)"
            )
        if cfg.hidden_act != "silu" or cfg.attention_bias or cfg.tie_word_embeddings:
            raise ModelLoadError("text_config must have hidden_act silu, no attention bias and an untied lm_head")
        if cfg.num_attention_heads % cfg.num_key_value_heads:
            raise ModelLoadError("text_config.num_attention_heads must be a multiple of num_key_value_heads")
        return cfg


@dataclass
class VisionConfig:
    """The Qwen2-VL vision tower (config.json ``vision_config``); defaults are the release's."""

    depth: int = 32
    embed_dim: int = 1280
    num_heads: int = 16
    mlp_ratio: float = 4
    patch_size: int = 14
    temporal_patch_size: int = 2
    spatial_merge_size: int = 2
    in_channels: int = 3
    hidden_act: str = "quick_gelu"

    @classmethod
    def from_dict(cls, data: dict) -> VisionConfig:
        if data.get("model_type", "qwen2_vl") != "qwen2_vl":
            raise ModelLoadError(
                f"vision_config.model_type {data.get('model_type')!r} is not supported (qwen2_vl only)"
            )
        return cls(**_pick(cls, data))

    def to_hf(self):
        """The transformers config the reused vision tower is built from."""
        from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig

        cfg = Qwen2VLVisionConfig(
            depth=self.depth,
            embed_dim=self.embed_dim,
            hidden_size=self.embed_dim,  # only the (removed) merger uses it
            num_heads=self.num_heads,
            mlp_ratio=self.mlp_ratio,
            patch_size=self.patch_size,
            temporal_patch_size=self.temporal_patch_size,
            spatial_merge_size=self.spatial_merge_size,
            in_channels=self.in_channels,
            hidden_act=self.hidden_act,
        )
        cfg._attn_implementation = "sdpa"
        return cfg


@dataclass
class MinerUDiffusionConfig:
    """config.json of a MinerU-Diffusion checkpoint. Token ids have no defaults: they come from the file."""

    text: SDARConfig
    vision: VisionConfig
    image_token_id: int
    mask_token_id: int
    vision_start_token_id: int | None = None
    vision_end_token_id: int | None = None
    projector_type: str = "patch_merger2x"

    @classmethod
    def from_dict(cls, data: dict) -> MinerUDiffusionConfig:
        text = data.get("text_config") or data.get("language_model_config")
        vision = data.get("vision_config") or data.get("vision_model_config")
        if not isinstance(text, dict) or not isinstance(vision, dict):
            raise ModelLoadError("config.json needs text_config (or language_model_config) and vision_config")
        for key in ("image_token_id", "mask_token_id"):
            if not isinstance(data.get(key), int):
                raise ModelLoadError(f"config.json has no integer {key}")
        projector = data.get("vision_projector_type", "patch_merger2x")
        cfg = cls(
            text=SDARConfig.from_dict(text),
            vision=VisionConfig.from_dict(vision),
            image_token_id=data["image_token_id"],
            mask_token_id=data["mask_token_id"],
            vision_start_token_id=data.get("vision_start_token_id"),
            vision_end_token_id=data.get("vision_end_token_id"),
            projector_type=projector,
        )
        if projector != f"patch_merger{cfg.vision.spatial_merge_size}x":
            raise ModelLoadError(f"vision_projector_type {projector!r} is not supported (patch_merger2x only)")
        return cfg

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every state-dict key of the official checkpoint with its shape (docs/real-models.md)."""
        t, v = self.text, self.vision
        e, p, tp = v.embed_dim, v.patch_size, v.temporal_patch_size
        hidden_mlp = int(e * v.mlp_ratio)
        merged = e * v.spatial_merge_size**2
        shapes: dict[str, tuple[int, ...]] = {"vision_model.patch_embed.proj.weight": (e, v.in_channels, tp, p, p)}
        for i in range(v.depth):
            b = f"vision_model.blocks.{i}."
            for norm in ("norm1", "norm2"):
                shapes[b + f"{norm}.weight"] = shapes[b + f"{norm}.bias"] = (e,)
            shapes.update({b + "attn.qkv.weight": (3 * e, e), b + "attn.qkv.bias": (3 * e,)})
            shapes.update({b + "attn.proj.weight": (e, e), b + "attn.proj.bias": (e,)})
            shapes.update({b + "mlp.fc1.weight": (hidden_mlp, e), b + "mlp.fc1.bias": (hidden_mlp,)})
            shapes.update({b + "mlp.fc2.weight": (e, hidden_mlp), b + "mlp.fc2.bias": (e,)})
        a = "vision_abstractor.projection."
        shapes.update({a + "ln_q.weight": (e,), a + "ln_q.bias": (e,)})
        shapes.update({a + "mlp.0.weight": (merged, merged), a + "mlp.0.bias": (merged,)})
        shapes.update({a + "mlp.2.weight": (t.hidden_size, merged), a + "mlp.2.bias": (t.hidden_size,)})
        h, d, q_out, kv_out = (
            t.hidden_size,
            t.head_dim,
            t.num_attention_heads * t.head_dim,
            t.num_key_value_heads * t.head_dim,
        )
        shapes["language_model.model.embed_tokens.weight"] = (t.vocab_size, h)
        for i in range(t.num_hidden_layers):
            b = f"language_model.model.layers.{i}."
            shapes.update({b + "self_attn.q_proj.weight": (q_out, h), b + "self_attn.o_proj.weight": (h, q_out)})
            shapes.update({b + "self_attn.k_proj.weight": (kv_out, h), b + "self_attn.v_proj.weight": (kv_out, h)})
            shapes.update({b + "self_attn.q_norm.weight": (d,), b + "self_attn.k_norm.weight": (d,)})
            shapes.update(
                {
                    b + "mlp.gate_proj.weight": (t.intermediate_size, h),
                    b + "mlp.up_proj.weight": (t.intermediate_size, h),
                }
            )
            shapes[b + "mlp.down_proj.weight"] = (h, t.intermediate_size)
            shapes[b + "input_layernorm.weight"] = shapes[b + "post_attention_layernorm.weight"] = (h,)
        shapes["language_model.model.norm.weight"] = (h,)
        shapes["language_model.lm_head.weight"] = (t.vocab_size, h)
        return shapes


# ---- attention masks and positions ---------------------------------------------------------------


def sdar_mask(prompt_len: int, gen_len: int, block_length: int, device=None) -> torch.Tensor:
    """(N, N) bool, True where query row may attend key column, for a prompt plus generated blocks.

    The release cuts the prompt into blocks of the decode's own ``block_length``, aligned to the
    end of the prompt (the first one may be short), attending block-causally; generated blocks of
    the same length see the whole prompt, all earlier generated blocks and themselves. So the
    prompt's keys/values depend on the block length: a cache prefilled for one block length is
    wrong for another (docs/real-models.md#the-attention-mask).
    """
    prefill_block = gen_block = block_length
    pad = (-prompt_len) % prefill_block
    prompt_ids = (torch.arange(prompt_len, device=device) + pad) // prefill_block
    n_prompt_blocks = (prompt_len + pad) // prefill_block
    gen_ids = n_prompt_blocks + torch.arange(gen_len, device=device) // gen_block
    ids = torch.cat([prompt_ids, gen_ids])
    return ids[None, :] <= ids[:, None]


def rope(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin (*positions.shape, head_dim) in float32 for integer positions ((N,) one row, (B, N)
    a batch with positions per row); inv_freq computed here, every call."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim))
    angles = positions.float()[..., None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """q or k rotated: in float32 when cos/sin are float32 (ours), in x's dtype when they were cast
    to it (the release: docs/real-models.md#bfloat16-numerics)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    if cos.dtype == x.dtype:
        return x * cos + rotated * sin
    return (x.float() * cos + rotated.float() * sin).to(x.dtype)


# ---- decoder -------------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: SDARConfig) -> None:
        super().__init__()
        self.n_heads, self.n_kv, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, self.n_kv * self.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, self.n_kv * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, cfg.hidden_size, bias=False)
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)

    def forward(self, x, cos, sin, cache: KVCache | None, layer: int, mask: torch.Tensor | None,
                slots: torch.Tensor | None = None):
        """Attention of ``x`` over the cache (if any) plus ``x`` itself.

        This chunk's keys/values (after RoPE) are written into the cache's free slots right after
        the committed part; whether they stay is the caller's choice (``KVCache.advance``).
        With ``slots`` (a device tensor of cache indices) they are written there instead and
        attention runs over the cache's whole capacity under ``mask``: fixed shapes, no host
        values, so the forward can be captured as a CUDA graph.
        """
        b, n, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, n, self.n_heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, n, self.n_kv, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.n_kv, self.head_dim).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        if cache is None:
            keys, values = k, v
        elif slots is None:
            keys, values = cache.write(layer, k, v)
        else:
            keys, values = cache.write_slots(layer, k, v, slots)
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=self.n_kv != self.n_heads)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, -1))


class MLP(nn.Module):
    def __init__(self, cfg: SDARConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: SDARConfig) -> None:
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, cos, sin, cache, layer, mask, slots=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache, layer, mask, slots)
        return x + self.mlp(self.post_attention_layernorm(x))


class KVCache:
    """Per-layer keys/values of everything committed so far (prompt + finished blocks).

    A forward writes its chunk into the free slots after the committed ``length`` and attends to
    ``[:length + n]``: no copy of the cache per forward. ``advance(n)`` keeps the chunk (the commit
    pass); otherwise the next forward overwrites it (a denoising pass that stores nothing).
    Capacity doubles when full.
    """

    def __init__(self, n_layers: int, rope_in_dtype: bool = False) -> None:
        self.k: list[torch.Tensor | None] = [None] * n_layers
        self.v: list[torch.Tensor | None] = [None] * n_layers
        self.length = 0
        self.evicted = False  # set by graphs.BlockGraphs when a later cache took over its buffers
        self.rope_in_dtype = rope_in_dtype  # every forward on this cache: RoPE in the model dtype (numerics "release")

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + k.shape[2]
        old = self.k[layer]
        if old is None or old.shape[2] < end:
            self._grow(layer, max(end, 2 * (old.shape[2] if old is not None else 0)), k)
        self.k[layer][:, :, self.length : end] = k
        self.v[layer][:, :, self.length : end] = v
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]

    def advance(self, n: int) -> None:
        self.length += n

    @property
    def capacity(self) -> int:
        return 0 if self.k[0] is None else self.k[0].shape[2]

    def reserve(self, capacity: int) -> None:
        """Grow every layer's buffers to ``capacity`` slots now (static forwards cannot grow them)."""
        for layer, k in enumerate(self.k):
            if k is not None and k.shape[2] < capacity:
                self._grow(layer, capacity, k)

    def _grow(self, layer: int, capacity: int, like: torch.Tensor) -> None:
        """New buffers of ``capacity`` slots for one layer, keeping the committed part.

        Zeros, not empty: static forwards attend over every slot under a mask, and a masked slot
        still multiplies its value by 0, so uninitialised NaN bits would leak through.
        """
        old_k, old_v = self.k[layer], self.v[layer]
        k = like.new_zeros(like.shape[0], like.shape[1], capacity, like.shape[3])
        v = like.new_zeros(k.shape)
        if old_k is not None and self.length:
            k[:, :, : self.length] = old_k[:, :, : self.length]
            v[:, :, : self.length] = old_v[:, :, : self.length]
        self.k[layer], self.v[layer] = k, v

    def write_slots(self, layer: int, k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor):
        """Write at the cache indices ``slots`` (a device tensor); return the whole-capacity buffers."""
        self.k[layer].index_copy_(2, slots, k)
        self.v[layer].index_copy_(2, slots, v)
        return self.k[layer], self.v[layer]


class SDARModel(nn.Module):
    def __init__(self, cfg: SDARConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(
        self, x: torch.Tensor, positions: torch.Tensor, cache: KVCache | None, mask: torch.Tensor | None, store: bool,
        slots: torch.Tensor | None = None,
    ):
        """Hidden states (B, N, H) for input embeddings ``x`` at ``positions``.

        Attends to ``cache`` (if any) plus ``x``; ``mask`` is (N, past + N) bool or None (= see all).
        ``store`` appends this chunk's keys/values to the cache. A batch of rows at their own
        positions (models/mineru_diffusion/batch.py) passes ``positions`` (B, N) and a mask
        (B, 1, N, past + N).
        """
        if store and cache is None:
            raise ValueError("store=True needs a cache")
        cos, sin = rope(positions, self.cfg.head_dim, self.cfg.rope_theta)
        if getattr(cache, "rope_in_dtype", False):  # the release casts cos/sin to the hidden states' dtype
            cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        if positions.dim() == 2:  # per-row positions: broadcast over the heads
            cos, sin = cos[:, None], sin[:, None]
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, cache, i, mask, slots)
        if store:
            cache.advance(x.shape[1])
        return self.norm(x)


class SDARForDiffusion(nn.Module):
    def __init__(self, cfg: SDARConfig) -> None:
        super().__init__()
        self.model = SDARModel(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)


# ---- vision --------------------------------------------------------------------------------------


class PatchMerger2x(nn.Module):
    """ln_q -> 2 x 2 neighbouring patches as one vector -> Linear -> GELU (erf) -> Linear."""

    def __init__(self, embed_dim: int, out_dim: int, merge: int = 2) -> None:
        super().__init__()
        self.merged = embed_dim * merge * merge
        self.ln_q = nn.LayerNorm(embed_dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(self.merged, self.merged), nn.GELU(), nn.Linear(self.merged, out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.ln_q(x).view(-1, self.merged))


class VisionAbstractor(nn.Module):
    def __init__(self, cfg: MinerUDiffusionConfig) -> None:
        super().__init__()
        self.projection = PatchMerger2x(cfg.vision.embed_dim, cfg.text.hidden_size, cfg.vision.spatial_merge_size)


def build_vision_tower(cfg: VisionConfig) -> nn.Module:
    """transformers' Qwen2-VL ViT with the merger removed (the projector replaces it)."""
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel

    tower = Qwen2VisionTransformerPretrainedModel(cfg.to_hf())
    tower.merger = nn.Identity()
    return tower


def reset_vision_rope(tower: nn.Module, cfg: VisionConfig, device: torch.device) -> None:
    """Recompute the ViT's non-persistent RoPE buffer (left uninitialised by meta-device loading)."""
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLVisionRotaryEmbedding

    tower.rotary_pos_emb = Qwen2VLVisionRotaryEmbedding(cfg.to_hf()).to(device)


# ---- the whole model -----------------------------------------------------------------------------


class MinerUDiffusion(nn.Module):
    def __init__(self, cfg: MinerUDiffusionConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.vision_model = build_vision_tower(cfg.vision)
        self.vision_abstractor = VisionAbstractor(cfg)
        self.language_model = SDARForDiffusion(cfg.text)

    @property
    def decoder(self) -> SDARModel:
        return self.language_model.model

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.decoder.embed_tokens(ids)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.language_model.lm_head(hidden)

    def image_features(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        """(n_image_tokens, hidden): last ViT layer -> patch-merger projector."""
        dtype = self.vision_abstractor.projection.ln_q.weight.dtype
        out = self.vision_model(pixel_values.to(dtype), grid_thw=grid_thw)
        return self.vision_abstractor.projection(out.last_hidden_state)

    def prompt_embeds(self, ids: torch.Tensor, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        """(1, P, hidden) prompt embeddings with the image features at the ``<|image_pad|>`` slots."""
        x = self.embed(ids[None])
        slots = ids == self.cfg.image_token_id
        feats = self.image_features(pixel_values, grid_thw)
        if int(slots.sum()) != feats.shape[0]:
            raise ValueError(f"{int(slots.sum())} image slots but {feats.shape[0]} image features")
        x[0, slots] = feats.to(x.dtype)
        return x

    def prefill(self, x: torch.Tensor, block_length: int, rope_in_dtype: bool = False) -> KVCache:
        """Block-causal prefill of the prompt embeddings (1, P, H) into a fresh cache, in prompt
        blocks of the decode's ``block_length`` aligned to the end of the prompt. ``rope_in_dtype``:
        this cache's forwards apply RoPE in the model dtype, as the release does."""
        p = x.shape[1]
        cache = KVCache(len(self.decoder.layers), rope_in_dtype)
        mask = sdar_mask(p, 0, block_length, device=x.device)
        self.decoder(x, torch.arange(p, device=x.device), cache, mask, store=True)
        return cache

    def block_forward(self, cache: KVCache, block_ids: torch.Tensor, store: bool) -> torch.Tensor | None:
        """Logits (1, L, V) of a block that sees the whole cache and itself (no mask needed).

        ``store=True`` is the commit pass: it appends the block's keys/values and skips the lm_head.
        """
        n = block_ids.shape[1]
        positions = torch.arange(cache.length, cache.length + n, device=block_ids.device)
        hidden = self.decoder(self.embed(block_ids), positions, cache, None, store)
        return None if store else self.logits(hidden)

    def spec_forward(self, cache: KVCache, layout, mask_id: int) -> torch.Tensor:
        """Logits (1, n_queries + n_draft_tokens, V) of a draft-and-verify forward (models/base.py
        SpecLayout, one row). The clean tokens' keys/values are written after the cache's committed
        part and stay there only when the caller advances the cache past them (the accepted prefix)."""
        clean = layout.clean
        n, dev = clean.shape[1], clean.device
        t0 = cache.length
        after, offsets = layout.after_clean(mask_id)
        ids = torch.cat([clean, after], 1)
        pos = [t0 + torch.arange(n, device=dev), t0 + offsets[0]]
        inner = layout.attention()[0]
        mask = torch.cat([torch.ones(inner.shape[0], t0, dtype=torch.bool, device=dev), inner], 1)
        hidden = self.decoder(self.embed(ids), torch.cat(pos), cache, mask, store=False)
        return self.logits(hidden[:, n:])

    def static_block_forward(self, cache: KVCache, block_ids: torch.Tensor, start: torch.Tensor, logits: bool):
        """``block_forward`` at fixed shapes: ``start`` (a 0-d device tensor) is the cache length.

        Keys/values go to slots ``start .. start + L``; attention covers the cache's whole capacity
        with the slots from ``start + L`` on masked out. Nothing here reads a value back to the
        host or changes a shape, so CUDA can capture it once and replay it (see graphs.py). The
        caller advances the cache after a commit pass.
        """
        n = block_ids.shape[1]
        positions = start + torch.arange(n, device=block_ids.device)
        visible = torch.arange(cache.capacity, device=block_ids.device) < start + n
        hidden = self.decoder(self.embed(block_ids), positions, cache, visible[None, :].expand(n, -1), False, positions)
        return self.logits(hidden) if logits else None


def count_params_m(model: nn.Module) -> float:
    return round(sum(p.numel() for p in model.parameters()) / 1e6, 1)


def from_state_dict(
    cfg: MinerUDiffusionConfig, state: dict[str, torch.Tensor], device: torch.device
) -> MinerUDiffusion:
    """The model built on the meta device and given the checkpoint's tensors (no random init, no copy).

    Keys are checked by the caller; the ViT's RoPE buffer (not in the checkpoint) is recomputed.
    """
    with torch.device("meta"):
        model = MinerUDiffusion(cfg)
    model.load_state_dict(state, strict=True, assign=True)
    reset_vision_rope(model.vision_model, cfg.vision, device)
    left = [n for n, t in list(model.named_parameters()) + list(model.named_buffers()) if t.is_meta]
    if left:
        raise ModelLoadError(f"tensors left uninitialised after loading: {', '.join(left[:5])}")
    return model.eval()
