"""The character pair's model (``nano-char``): MinerU-Diffusion's shape at toy scale, for one text
line, with character tokens; its building blocks are the subword pair's (models/nano/model.py).

    line image (1 x 32 x W)
      -> conv stem (stride 4 across the line) -> 2 transformer layers    = vision encoder
         (+ a CTC head: an auxiliary loss that makes glyph positions emerge fast on a CPU)
      -> patch merger 2x (LayerNorm, 2 neighbours, MLP)                   = projector
      -> decoder over [visual tokens ; <bos> ; answer]                    = SDAR-style decoder
         (RMSNorm, QK-norm, RoPE, SwiGLU, no biases; the caller passes the attention mask)

Its config is the subword pair's :class:`NanoConfig` (``NanoConfig.character()`` gives this pair's
shape). The same weights serve two twins that differ only in the attention mask and the loss: the AR twin
is causal over the answer; the diffusion twin is block-causal with bidirectional blocks. Visual
tokens are left-padded so every row's answer starts at the same position (RoPE is relative, so the
padding only needs masking).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from models.nano.model import NanoOCR as SubwordNanoOCR
from models.nano.model import ctc_frame_positions


class NanoOCR(SubwordNanoOCR):
    """The subword pair's network (same modules, same state-dict names) with the character pair's
    vision-to-decoder wiring: one line per row, answer position k at rotary position k."""

    # ---- vision side -------------------------------------------------------------------------

    def encode(self, images: torch.Tensor, widths: torch.Tensor) -> "Visual":
        """Line images -> encoder states and visual tokens, right-aligned so all rows end at P-1.

        widths: (B,) true pixel widths. With ``ctc_positions`` each visual token's rotary position is
        the index of the character the CTC head reads there (k for the frames of character k, k+0.5
        between characters), so answer position k finds its glyph by relative position alone (after
        a misread the backend shifts the positions that follow back onto the CTC reading:
        models/nano/anchor.py).
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
            frame_pos, _ = ctc_frame_positions(self.ctc_head(enc), enc_len, blank=0)
            if frame_pos.shape[1] % 2:
                frame_pos = torch.cat([frame_pos, frame_pos[:, -1:]], 1)
            pos = torch.gather(frame_pos.view(b, -1, 2).mean(-1), 1, idx)
        else:  # plain sequence positions: the visual tokens just before <bos> (-1)
            pos = (torch.arange(p, device=vis.device, dtype=torch.float32) - p - 1).expand(b, p)
        vis_mask = torch.arange(p, device=vis.device)[None, :] >= shift[:, None]
        return Visual(enc, enc_len, vis, vis_mask, torch.where(vis_mask, pos, torch.zeros_like(pos)))

    # ---- decoder -------------------------------------------------------------------------

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
