"""The nano OCR model: MinerU-Diffusion's shape at toy scale, for one text line.

    line image (1 x 32 x W)
      -> conv stem (stride 4 across the line) -> 2 transformer layers    = vision encoder
         (+ a CTC head: an auxiliary loss that makes glyph positions emerge fast on a CPU)
      -> patch merger 2x (LayerNorm, 2 neighbours, MLP)                   = projector
      -> decoder over [visual tokens ; <bos> ; answer]                    = SDAR-style decoder
         (RMSNorm, QK-norm, RoPE, SwiGLU, no biases; the caller passes the attention mask)

The same weights serve two twins that differ only in the attention mask and the loss: the AR twin
is causal over the answer; the diffusion twin is block-causal with bidirectional blocks. Visual
tokens are left-padded so every row's answer starts at the same position (RoPE is relative, so the
padding only needs masking).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class NanoConfig:
    kind: str = "ar"  # "ar" | "diffusion": which twin these weights are
    image_height: int = 32
    conv_channels: tuple[int, ...] = (32, 64, 96, 128)
    enc_dim: int = 192
    enc_layers: int = 2
    d_model: int = 192
    n_layers: int = 4
    n_heads: int = 6
    mlp_hidden: int = 512
    vocab_size: int = 100
    rope_theta: float = 10000.0
    max_answer: int = 320  # longest answer the decoder is built for (characters of one line)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        d = asdict(self)
        d["conv_channels"] = list(self.conv_channels)
        return d

    @staticmethod
    def from_dict(d: dict) -> "NanoConfig":
        d = dict(d)
        d["conv_channels"] = tuple(d.get("conv_channels", NanoConfig.conv_channels))
        return NanoConfig(**{k: v for k, v in d.items() if k in NanoConfig.__dataclass_fields__})


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def rope_tables(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables for integer positions (any shape) -> (..., head_dim/2)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=positions.device) / head_dim))
    angles = positions.to(torch.float32)[..., None] * inv_freq
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, H, T, D); cos/sin: (T, D/2). Rotate-half convention."""
    x1, x2 = x.chunk(2, dim=-1)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, dim: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.q_norm = RMSNorm(self.head_dim)
        self.k_norm = RMSNorm(self.head_dim)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: torch.Tensor | None,
        past: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Returns (output, k, v) where k, v are this input's keys/values (after RoPE), for caching.

        ``past`` (B, H, Tp, D) keys/values are attended to before x's own; ``mask`` is boolean
        (B or 1, 1, T, Tp + T), True = may attend.
        """
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q = apply_rope(self.q_norm(q), cos, sin)
        k = apply_rope(self.k_norm(k), cos, sin)
        if past is not None:
            keys, values = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        else:
            keys, values = k, v
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return self.o(out.transpose(1, 2).reshape(b, t, -1)), k, v


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, dim: int, n_heads: int, hidden: int) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = Attention(dim, n_heads)
        self.mlp_norm = RMSNorm(dim)
        self.mlp = SwiGLU(dim, hidden)

    def forward(self, x, cos, sin, mask, past=None):
        a, k, v = self.attn(self.attn_norm(x), cos, sin, mask, past)
        x = x + a
        return x + self.mlp(self.mlp_norm(x)), k, v


class VisionEncoder(nn.Module):
    """Conv stem + transformer layers over horizontal positions; output stride 4 pixels."""

    def __init__(self, cfg: NanoConfig) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in, h = 1, cfg.image_height
        for i, c in enumerate(cfg.conv_channels):
            stride = (2, 2) if i < 2 else (2, 1)
            layers += [nn.Conv2d(c_in, c, 3, stride=stride, padding=1), nn.GELU()]
            c_in, h = c, (h + 1) // 2
        self.stem = nn.Sequential(*layers)
        self.stem_out = nn.Linear(c_in * h, cfg.enc_dim)
        self.layers = nn.ModuleList(Block(cfg.enc_dim, max(1, cfg.enc_dim // 32), cfg.enc_dim * 2) for _ in range(cfg.enc_layers))
        self.norm = RMSNorm(cfg.enc_dim)
        self.theta = cfg.rope_theta

    def forward(self, images: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """images (B, 1, H, W) ink=1; lengths (B,) valid encoder steps. Returns (B, W/4, enc_dim)."""
        f = self.stem(images)  # B, C, h, W/4
        b, c, h, w = f.shape
        x = self.stem_out(f.permute(0, 3, 1, 2).reshape(b, w, c * h))
        valid = torch.arange(w, device=x.device)[None, :] < lengths[:, None]
        mask = (valid[:, None, None, :] | torch.eye(w, dtype=torch.bool, device=x.device)[None, None])
        cos, sin = rope_tables(torch.arange(w, device=x.device), self.layers[0].attn.head_dim, self.theta)
        for layer in self.layers:
            x, _, _ = layer(x, cos, sin, mask)
        return self.norm(x)


class PatchMerger(nn.Module):
    """MinerU's ``patch_merger2x`` in one dimension: LayerNorm, 2 neighbours -> MLP -> d_model."""

    def __init__(self, enc_dim: int, d_model: int) -> None:
        super().__init__()
        self.ln_q = nn.LayerNorm(enc_dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(2 * enc_dim, 2 * enc_dim), nn.GELU(), nn.Linear(2 * enc_dim, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, w, d = x.shape
        x = self.ln_q(x)
        if w % 2:
            x = F.pad(x, (0, 0, 0, 1))
            w += 1
        return self.mlp(x.reshape(b, w // 2, 2 * d))


class NanoOCR(nn.Module):
    def __init__(self, cfg: NanoConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = VisionEncoder(cfg)
        self.ctc_head = nn.Linear(cfg.enc_dim, cfg.vocab_size)
        self.projector = PatchMerger(cfg.enc_dim, cfg.d_model)
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(Block(cfg.d_model, cfg.n_heads, cfg.mlp_hidden) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    # ---- vision side -------------------------------------------------------------------------

    def encode(self, images: torch.Tensor, widths: torch.Tensor):
        """Line images -> (encoder states, encoder lengths, visual tokens left-padded, visual mask).

        widths: (B,) true pixel widths. Visual tokens: (B, P, d_model), right-aligned so all rows
        end at position P-1; mask (B, P) is True on real tokens.
        """
        enc_len = (widths + 3) // 4
        enc = self.encoder(images, enc_len)
        vis = self.projector(enc)
        vis_len = (enc_len + 1) // 2
        p = vis.shape[1]
        # right-align: roll each row so its real tokens end at position P-1
        shift = p - vis_len
        idx = (torch.arange(p, device=vis.device)[None, :] - shift[:, None]) % p
        vis = torch.gather(vis, 1, idx[:, :, None].expand(-1, -1, vis.shape[2]))
        vis_mask = torch.arange(p, device=vis.device)[None, :] >= shift[:, None]
        return enc, enc_len, vis, vis_mask

    # ---- decoder -----------------------------------------------------------------------------

    def rope(self, positions: torch.Tensor):
        return rope_tables(positions, self.cfg.head_dim, self.cfg.rope_theta)

    def run_layers(self, x, positions, mask, past=None):
        """Decoder stack. past: list of per-layer (k, v) or None. Returns (hidden, [(k, v)...])."""
        cos, sin = self.rope(positions)
        new_kv = []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, cos, sin, mask, None if past is None else past[i])
            new_kv.append((k, v))
        return self.norm(x), new_kv

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden)

    def prefill(self, vis: torch.Tensor, vis_mask: torch.Tensor, bos_id: int):
        """Prompt = [visual tokens ; <bos>], bidirectional. Returns (logits at <bos>, per-layer kv, key mask)."""
        b, p, _ = vis.shape
        bos = self.embed(torch.full((b, 1), bos_id, dtype=torch.long, device=vis.device))
        x = torch.cat([vis, bos], dim=1)
        key_mask = torch.cat([vis_mask, torch.ones(b, 1, dtype=torch.bool, device=vis.device)], dim=1)
        mask = key_mask[:, None, None, :] | torch.eye(p + 1, dtype=torch.bool, device=vis.device)[None, None]
        hidden, kv = self.run_layers(x, torch.arange(p + 1, device=vis.device), mask)
        return self.logits(hidden[:, -1]), kv, key_mask


def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def count_m(model: nn.Module) -> float:
    return round(param_count(model) / 1e6, 2)

