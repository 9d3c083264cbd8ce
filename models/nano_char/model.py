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
    # Visual tokens take their rotary positions from the CTC head's running character count, so
    # the glyph of character k and answer position k share a position (see NanoOCR.encode).
    ctc_positions: bool = True

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
        d.setdefault("ctc_positions", False)  # configs written before the option used plain positions
        return NanoConfig(**{k: v for k, v in d.items() if k in NanoConfig.__dataclass_fields__})


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def rope_tables(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables for positions (any shape; fractional positions allowed) -> (..., head_dim/2)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=positions.device) / head_dim))
    angles = positions.to(torch.float32)[..., None] * inv_freq
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, H, T, D); cos/sin: (T, D/2) or per row (B, T, D/2). Rotate-half convention."""
    x1, x2 = x.chunk(2, dim=-1)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if cos.dim() == 3:
        cos, sin = cos[:, None], sin[:, None]
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
        past: tuple[torch.Tensor, torch.Tensor, int] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Returns (output, k, v) where k, v are this input's keys/values (after RoPE), for caching.

        ``past`` = (k_buf, v_buf, t): cache buffers (B, H, capacity, D) holding t filled slots.
        This input's keys/values are written into slots t..t+T (no concatenation, no copy of the
        cache) and attention runs over slots 0..t+T. Whether the slots count as stored is the
        caller's business (the decoder's "attend without storing" simply does not advance t).
        ``mask`` is boolean (B or 1, 1, T, t + T), True = may attend.
        """
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q = apply_rope(self.q_norm(q), cos, sin)
        k = apply_rope(self.k_norm(k), cos, sin)
        if past is not None:
            k_buf, v_buf, t = past
            k_buf[:, :, t : t + n] = k
            v_buf[:, :, t : t + n] = v
            keys, values = k_buf[:, :, : t + n], v_buf[:, :, : t + n]
        else:
            keys, values = k, v
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return self.o(out.transpose(1, 2).reshape(b, n, -1)), k, v


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

    def encode(self, images: torch.Tensor, widths: torch.Tensor) -> "Visual":
        """Line images -> encoder states and visual tokens, right-aligned so all rows end at P-1.

        widths: (B,) true pixel widths. With ``ctc_positions`` each visual token's rotary position is
        the index of the character the CTC head reads there (k for the frames of character k, k+0.5
        between characters), so answer position k finds its glyph by relative position alone.
        """
        enc_len = (widths + 3) // 4
        enc = self.encoder(images, enc_len)
        vis = self.projector(enc)
        vis_len = (enc_len + 1) // 2
        b, p, _ = vis.shape
        # right-align: roll each row so its real tokens end at position P-1
        shift = p - vis_len
        idx = (torch.arange(p, device=vis.device)[None, :] - shift[:, None]) % p
        vis = torch.gather(vis, 1, idx[:, :, None].expand(-1, -1, vis.shape[2]))
        if self.cfg.ctc_positions:
            frame_pos = ctc_frame_positions(self.ctc_head(enc), enc_len, blank=0)
            if frame_pos.shape[1] % 2:
                frame_pos = torch.cat([frame_pos, frame_pos[:, -1:]], 1)
            pos = torch.gather(frame_pos.view(b, -1, 2).mean(-1), 1, idx)
        else:  # plain sequence positions: the visual tokens just before <bos> (-1)
            pos = (torch.arange(p, device=vis.device, dtype=torch.float32) - p - 1).expand(b, p)
        vis_mask = torch.arange(p, device=vis.device)[None, :] >= shift[:, None]
        return Visual(enc, enc_len, vis, vis_mask, torch.where(vis_mask, pos, torch.zeros_like(pos)))

    # ---- decoder -----------------------------------------------------------------------------

    def rope(self, positions: torch.Tensor):
        return rope_tables(positions, self.cfg.head_dim, self.cfg.rope_theta)

    def run_layers(self, x, positions, mask, past=None):
        """Decoder stack. past: per-layer (k_buf, v_buf, t) cache slots or None. Returns (hidden, [(k, v)...])."""
        cos, sin = self.rope(positions)
        new_kv = []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, cos, sin, mask, None if past is None else past[i])
            new_kv.append((k, v))
        return self.norm(x), new_kv

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden)

    def prefill(self, v: "Visual", bos_id: int):
        """Prompt = [visual tokens ; <bos>], bidirectional. Returns (logits at <bos>, per-layer kv, key mask).

        Answer position k (0-based) sits at rotary position k; <bos> at -1."""
        b, p, _ = v.vis.shape
        dev = v.vis.device
        bos = self.embed(torch.full((b, 1), bos_id, dtype=torch.long, device=dev))
        x = torch.cat([v.vis, bos], dim=1)
        key_mask = torch.cat([v.vis_mask, torch.ones(b, 1, dtype=torch.bool, device=dev)], dim=1)
        mask = key_mask[:, None, None, :] | torch.eye(p + 1, dtype=torch.bool, device=dev)[None, None]
        hidden, kv = self.run_layers(x, self.prompt_positions(v), mask)
        return self.logits(hidden[:, -1]), kv, key_mask

    @staticmethod
    def prompt_positions(v: "Visual") -> torch.Tensor:
        """(B, P + 1) rotary positions of [visual tokens ; <bos>]."""
        return torch.cat([v.vis_pos, torch.full_like(v.vis_pos[:, :1], -1.0)], dim=1)


@dataclass
class Visual:
    enc: torch.Tensor  # (B, W/4, enc_dim) encoder states (CTC head input)
    enc_len: torch.Tensor  # (B,) valid encoder steps
    vis: torch.Tensor  # (B, P, d_model) visual tokens, right-aligned
    vis_mask: torch.Tensor  # (B, P) True on real tokens
    vis_pos: torch.Tensor  # (B, P) rotary positions of the visual tokens


@torch.no_grad()
def ctc_frame_positions(ctc_logits: torch.Tensor, lengths: torch.Tensor, blank: int) -> torch.Tensor:
    """Per encoder frame, the index of the character the greedy CTC path reads there.

    Frames that emit or repeat character k get k; blank frames after it get k + 0.5 (before the
    first character: -0.5). Padding frames carry the last value.
    """
    best = ctc_logits.argmax(-1)
    valid = torch.arange(best.shape[1], device=best.device)[None, :] < lengths[:, None]
    prev = torch.cat([torch.full_like(best[:, :1], blank), best[:, :-1]], dim=1)
    emit = (best != blank) & (best != prev) & valid
    idx = torch.cumsum(emit.long(), dim=1) - 1
    return torch.where(best == blank, idx.float() + 0.5, idx.float())

def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def count_m(model: nn.Module) -> float:
    return round(param_count(model) / 1e6, 2)

