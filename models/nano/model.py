"""The nano OCR model: MinerU-Diffusion's shape at toy scale, for a text block of several lines.

    lines of a region, each 1 x 32 x W
      -> conv stem (stride 4 across the line) -> 2 transformer layers     = vision encoder
         (+ a CTC head over characters: an auxiliary loss, and each visual token's position)
      -> patch merger 2x (LayerNorm, 2 neighbours, MLP)                    = projector
      -> the lines' visual tokens concatenated in reading order; they replace the
         <|image_pad|> placeholders of the prompt [<|image_pad|> x P ; <|im_start|>]
      -> decoder over [prompt ; answer] with a byte-level BPE vocabulary   = SDAR-style decoder
         (RMSNorm, QK-norm, RoPE, SwiGLU, no biases; the caller passes the attention mask)

Positions. Rotary positions live on one axis of characters, so a glyph and the answer text that
reads it can meet by relative position:

- a visual token sits at the character index the CTC head reads there, counted from the start of
  its line, plus the line's start (the CTC character counts of the lines before it, +1 for each
  line break);
- the answer's positions come only from text already committed (:func:`walk`), the column put
  back onto the CTC head's reading of the line after every commit (models/nano/anchor.py, done by
  the backend): a committed token sits on its last character (the next text starts one position later); inside a block being
  denoised a token sits on the character before its estimated start: where the committed text
  before it ends, each still-masked token before it counting ``chars_per_token`` characters.
  (Sitting on the last character read, not the next one, is the character pair's convention, so
  its trained decoder layers start this pair.) Masked positions are never aligned to glyphs one by one, so a
  token further into a block does not know exactly where its glyphs are and leans on its
  neighbours: the decoding dynamics the real model has.

The same weights serve two twins that differ only in the attention mask and the loss: the AR twin
is causal over the answer; the diffusion twin is block-causal with bidirectional blocks.
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
    n_layers: int = 6
    n_heads: int = 6
    mlp_hidden: int = 512
    vocab_size: int = 2048  # decoder vocabulary: byte-level BPE (tokenizer.json beside the weights)
    ctc_vocab_size: int = 100  # the CTC head's alphabet: characters (CharTokenizer)
    rope_theta: float = 10000.0
    max_answer: int = 512  # tokens per region the decoder is built for
    max_lines: int = 8  # lines per region
    chars_per_token: float = 3.5  # how far a still-masked token moves the reading position
    count_scales: int = 0  # diffusion: learned logit scales by masked tokens before a token in its block (0 = none)
    query_shifts: tuple[float, ...] = ()  # diffusion: per head, how far (characters per sqrt(masked run)) a
    # masked token's query looks past its estimated start (empty = none; measured, no gain: docs/nano-models.md)
    # The character pair (models/nano_char): visual tokens take their rotary positions from the CTC head's
    # running character count, so the glyph of character k and answer position k share a position.
    ctc_positions: bool = False

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        d = asdict(self)
        d["conv_channels"] = list(self.conv_channels)
        d["query_shifts"] = list(self.query_shifts)
        return d

    @staticmethod
    def from_dict(d: dict) -> "NanoConfig":
        """From a ``config.json``; keys a config lacks take the defaults (older character-pair configs
        without ``ctc_positions`` used plain positions), unknown keys are ignored."""
        d = dict(d)
        d["conv_channels"] = tuple(d.get("conv_channels", NanoConfig.conv_channels))
        d["query_shifts"] = tuple(d.get("query_shifts", ()))
        return NanoConfig(**{k: v for k, v in d.items() if k in NanoConfig.__dataclass_fields__})

    @staticmethod
    def character(**overrides) -> "NanoConfig":
        """The character pair's shape: one line per row, 100 character ids (the CTC alphabet too),
        four decoder layers, CTC-count positions."""
        base = dict(n_layers=4, vocab_size=100, ctc_vocab_size=100, max_answer=320, ctc_positions=True)
        return NanoConfig(**{**base, **overrides})


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
    """x: (B, H, T, D); cos/sin: (T, D/2), per row (B, T, D/2) or per row and head (B, H, T, D/2).
    Rotate-half convention."""
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
        q_rope: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Returns (output, k, v) where k, v are this input's keys/values (after RoPE), for caching.

        ``q_rope``: cos/sin for the queries when they sit elsewhere than the keys (per head:
        :meth:`NanoOCR.query_positions`); default the keys' tables.

        ``past`` = (k_buf, v_buf, t): cache buffers (B, H, capacity, D) holding t filled slots.
        This input's keys/values are written into slots t..t+T (no concatenation, no copy of the
        cache) and attention runs over slots 0..t+T. Whether the slots count as stored is the
        caller's business (the decoder's "attend without storing" simply does not advance t).
        ``mask`` is boolean (B or 1, 1, T, t + T), True = may attend.
        """
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q = apply_rope(self.q_norm(q), *(q_rope or (cos, sin)))
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

    def forward(self, x, cos, sin, mask, past=None, q_rope=None):
        a, k, v = self.attn(self.attn_norm(x), cos, sin, mask, past, q_rope)
        x = x + a
        return x + self.mlp(self.mlp_norm(x)), k, v


class VisionEncoder(nn.Module):
    """Conv stem + transformer layers over horizontal positions of one line; output stride 4 pixels."""

    def __init__(self, cfg) -> None:
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


@torch.no_grad()
def ctc_frame_positions(ctc_logits: torch.Tensor, lengths: torch.Tensor, blank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per encoder frame, the index of the character the greedy CTC path reads there, and per row
    the number of characters it reads.

    Frames that emit or repeat character k get k; blank frames after it get k + 0.5 (before the
    first character: -0.5). Padding frames carry the last value.
    """
    best = ctc_logits.argmax(-1)
    valid = torch.arange(best.shape[1], device=best.device)[None, :] < lengths[:, None]
    prev = torch.cat([torch.full_like(best[:, :1], blank), best[:, :-1]], dim=1)
    emit = (best != blank) & (best != prev) & valid
    idx = torch.cumsum(emit.long(), dim=1) - 1
    return torch.where(best == blank, idx.float() + 0.5, idx.float()), emit.sum(1)


@dataclass
class CharTables:
    """Per token id: characters written, newlines among them, characters after the last newline."""

    length: torch.Tensor
    newlines: torch.Tensor
    tail: torch.Tensor

    @staticmethod
    def of(tok) -> "CharTables":
        """The tables of a tokenizer (its ``char_tables``: three numpy arrays, one row per id)."""
        return CharTables(*(torch.from_numpy(a) for a in tok.char_tables))

    def to(self, device) -> "CharTables":
        return CharTables(self.length.to(device), self.newlines.to(device), self.tail.to(device))


def walk(
    line0: torch.Tensor,
    col0: torch.Tensor,
    ids: torch.Tensor,
    known: torch.Tensor,
    tables: CharTables,
    chars_per_token: float,
    skip: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Move a reading position (line, column) along a row of tokens.

    ``line0``/``col0`` (B,): where the row starts; ``ids``/``known`` (B, L). A known token moves the
    position by its text (a newline goes to column 0 of the next line); an unknown (masked) token
    by ``chars_per_token`` columns; a ``skip`` token (padding of a ragged row) not at all. Returns
    (line_before, col_before, line_after, col_after), each (B, L): where each token starts and where it ends.
    """
    length = torch.where(known, tables.length[ids], torch.full_like(ids, 0, dtype=torch.float32) + chars_per_token)
    nl = torch.where(known, tables.newlines[ids], torch.zeros_like(length))
    if skip is not None:
        length, nl = length.masked_fill(skip, 0.0), nl.masked_fill(skip, 0)
    tail = tables.tail[ids]
    line_after = line0[:, None] + torch.cumsum(nl, dim=1)
    run = torch.cumsum(length, dim=1)  # columns moved so far, ignoring newlines
    idx = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
    last_nl = torch.cummax(torch.where(nl > 0, idx, torch.full_like(idx, -1)), dim=1).values
    safe = last_nl.clamp(min=0)
    since = run - torch.gather(run, 1, safe)  # columns after the last newline token
    col_after = torch.where(last_nl >= 0, torch.gather(tail, 1, safe) + since, col0[:, None] + run)
    line_before = torch.cat([line0[:, None], line_after[:, :-1]], dim=1)
    col_before = torch.cat([col0[:, None].to(col_after.dtype), col_after[:, :-1]], dim=1)
    return line_before, col_before, line_after, col_after


def masked_runs(masked: torch.Tensor) -> torch.Tensor:
    """(B, L) rows of one block each: for every token, how many masked tokens sit between it and the
    last unmasked token before it in its row (or the row's start), times whether it is masked
    itself. 0 for the token right after committed text, 1 for the one after that, ..."""
    idx = torch.arange(masked.shape[1], device=masked.device).expand_as(masked)
    known_at = torch.where(masked, torch.full_like(idx, -1), idx)
    last_known = torch.cummax(known_at, dim=1).values  # last unmasked position at or before each token
    before = torch.cat([torch.full_like(last_known[:, :1], -1), last_known[:, :-1]], dim=1)
    return (idx - 1 - before) * masked


def greedy_ctc_paths(ctc_logits: torch.Tensor, lengths: torch.Tensor, blank: int = 0) -> list[list[tuple[int, int]]]:
    """Per line: the greedy CTC reading as (character id, pixel column) pairs, repeats collapsed and
    blanks dropped; a character sits at the centre of its first frame (4 pixels per frame)."""
    paths = []
    for row, n in zip(ctc_logits.argmax(-1).cpu().tolist(), lengths.cpu().tolist()):
        path, prev = [], None
        for t, tok in enumerate(row[:n]):
            if tok != prev and tok != blank:
                path.append((tok, 4 * t + 2))
            prev = tok
        paths.append(path)
    return paths


def answer_position(line_starts: torch.Tensor, line: torch.Tensor, col: torch.Tensor) -> torch.Tensor:
    """Rotary position of an answer token whose reading position is (line, column): the line's
    start on the visual axis plus the column, minus one (the token sits on the character before).

    ``line_starts`` (B, n_lines + 1): the last entry is where text after the last line would start.
    """
    line = line.long().clamp(0, line_starts.shape[1] - 1)
    return torch.gather(line_starts, 1, line) + col - 1.0


@dataclass
class Visual:
    """The visual tokens of a batch of regions, right-aligned so every row's prompt ends at P-1."""

    enc: torch.Tensor  # (n_lines, W/4, enc_dim) encoder states of every line (CTC head input)
    enc_len: torch.Tensor  # (n_lines,) valid encoder steps
    vis: torch.Tensor  # (B, P, d_model) visual tokens of each region, right-aligned
    vis_mask: torch.Tensor  # (B, P) True on real tokens
    vis_pos: torch.Tensor  # (B, P) rotary positions of the visual tokens
    line_starts: torch.Tensor  # (B, max_lines + 1) start of each line on the position axis
    ctc_counts: torch.Tensor  # (n_lines,) characters the CTC head reads on each line


class NanoOCR(nn.Module):
    def __init__(self, cfg: NanoConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = VisionEncoder(cfg)
        self.ctc_head = nn.Linear(cfg.enc_dim, cfg.ctc_vocab_size)
        self.projector = PatchMerger(cfg.enc_dim, cfg.d_model)
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(Block(cfg.d_model, cfg.n_heads, cfg.mlp_hidden) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.count_scales:
            self.count_scale = nn.Parameter(torch.ones(cfg.count_scales))
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

    def encode(self, images: torch.Tensor, widths: torch.Tensor, lines_per_region: list[int]) -> Visual:
        """Line images (all lines of all regions, in reading order) -> each region's visual tokens.

        ``lines_per_region``: how many consecutive lines each region owns.
        """
        enc_len = (widths + 3) // 4
        enc = self.encoder(images, enc_len)
        frame_pos, counts = ctc_frame_positions(self.ctc_head(enc), enc_len, blank=0)
        vis = self.projector(enc)  # (n_lines, Pl, d)
        vis_len = (enc_len + 1) // 2
        if frame_pos.shape[1] % 2:
            frame_pos = torch.cat([frame_pos, frame_pos[:, -1:]], 1)
        tok_pos = frame_pos.view(frame_pos.shape[0], -1, 2).mean(-1)  # (n_lines, Pl)
        dev = vis.device
        b = len(lines_per_region)
        n_max = max(lines_per_region)
        region_len = []
        line_starts = torch.zeros(b, n_max + 1, device=dev)
        first = 0
        for r, n in enumerate(lines_per_region):
            starts = torch.cumsum(torch.cat([torch.zeros(1, device=dev), counts[first : first + n].float() + 1]), 0)
            line_starts[r, : n + 1] = starts
            line_starts[r, n + 1 :] = starts[-1]
            region_len.append(int(vis_len[first : first + n].sum()))
            first += n
        p = max(region_len)
        out = vis.new_zeros(b, p, vis.shape[2])
        pos = torch.zeros(b, p, device=dev)
        mask = torch.zeros(b, p, dtype=torch.bool, device=dev)
        # gather each region's valid tokens, line after line, right-aligned
        line_idx, tok_idx, row_idx, slot_idx = [], [], [], []
        first = 0
        lens = vis_len.tolist()
        for r, n in enumerate(lines_per_region):
            slot = p - region_len[r]
            for li in range(first, first + n):
                k = lens[li]
                line_idx += [li] * k
                tok_idx += range(k)
                row_idx += [r] * k
                slot_idx += range(slot, slot + k)
                slot += k
            first += n
        li_t = torch.tensor(line_idx, device=dev)
        tk_t = torch.tensor(tok_idx, device=dev)
        rw_t = torch.tensor(row_idx, device=dev)
        sl_t = torch.tensor(slot_idx, device=dev)
        out[rw_t, sl_t] = vis[li_t, tk_t]
        line_of_region = li_t - torch.tensor([sum(lines_per_region[:r]) for r in range(b)], device=dev)[rw_t]
        pos[rw_t, sl_t] = tok_pos[li_t, tk_t] + line_starts[rw_t, line_of_region]
        mask[rw_t, sl_t] = True
        return Visual(enc, enc_len, out, mask, pos, line_starts, counts)

    # ---- decoder -----------------------------------------------------------------------------

    def rope(self, positions: torch.Tensor):
        return rope_tables(positions, self.cfg.head_dim, self.cfg.rope_theta)

    def query_positions(self, positions: torch.Tensor, runs: torch.Tensor) -> torch.Tensor | None:
        """Per head, where each query looks: (B, H, T), or None without ``query_shifts``.

        ``runs`` (B, T): for a masked token of a block being denoised, how many masked tokens sit
        between it and the committed text before it (0 elsewhere, :func:`masked_runs`). Such a
        token's start is known only to about 2.4 characters times sqrt(run) (the spread of the
        subword lengths it counts at ``chars_per_token``), so head h looks ``query_shifts[h] *
        sqrt(run)`` characters further: the heads hold several guesses of where its glyphs are,
        and the layers above pick the one its neighbours' lengths support. The keys stay where they
        are; the token right after committed text (run 0) and committed text look where they sit."""
        if not self.cfg.query_shifts:
            return None
        shifts = torch.tensor(self.cfg.query_shifts, dtype=torch.float32, device=positions.device)
        return positions.float()[:, None, :] + shifts[None, :, None] * runs.float().sqrt()[:, None, :]

    def run_layers(self, x, positions, mask, past=None, runs=None):
        """Decoder stack. past: per-layer (k_buf, v_buf, t) cache slots or None; runs: (B, T) masked
        runs for :meth:`query_positions` (None: queries sit with their keys). Returns (hidden, [(k, v)...])."""
        cos, sin = self.rope(positions)
        q_pos = None if runs is None else self.query_positions(positions, runs)
        q_rope = None if q_pos is None else self.rope(q_pos)
        new_kv = []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, cos, sin, mask, None if past is None else past[i], q_rope)
            new_kv.append((k, v))
        return self.norm(x), new_kv

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden)

    def scale_block_logits(self, logits: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """A block's logits (R, L, V) times the learned scale for the number of masked tokens before
        each token in its block (``masked`` (R, L), one block per row; the last scale serves any count
        past it). Identity without ``count_scales``.

        Why: the final RMSNorm bounds every position's logit norm alike, so the token right after
        committed text (read almost always right) cannot be made surer than one ten tokens in (read
        half the time). The release sampler ranks tokens by that confidence, so the bound decides
        which token it commits when none passes the threshold. The scales are fit by cross-entropy
        (``nano_training/calibrate.py``; docs/nano-models.md)."""
        if not self.cfg.count_scales:
            return logits
        m = masked.long()
        before = (m.cumsum(-1) - m).clamp(max=self.cfg.count_scales - 1)
        return logits * self.count_scale.to(logits.dtype)[before][..., None]

    def prompt_embeddings(self, v: Visual, image_pad_id: int, bos_id: int) -> torch.Tensor:
        """[<|image_pad|> x P ; <|im_start|>] embedded, the placeholders replaced by the visual tokens."""
        b, p, _ = v.vis.shape
        ids = torch.full((b, p + 1), image_pad_id, dtype=torch.long, device=v.vis.device)
        ids[:, -1] = bos_id
        x = self.embed(ids)
        return torch.cat([torch.where(v.vis_mask[..., None], v.vis, x[:, :p]), x[:, p:]], dim=1)

    @staticmethod
    def prompt_positions(v: Visual) -> torch.Tensor:
        """(B, P + 1) rotary positions of the prompt; <|im_start|> sits just before the first character."""
        return torch.cat([v.vis_pos, torch.full_like(v.vis_pos[:, :1], -1.0)], dim=1)

    def prefill(self, v: Visual, image_pad_id: int, bos_id: int):
        """The prompt, bidirectional. Returns (logits at <|im_start|>, per-layer kv, key mask)."""
        b, p, _ = v.vis.shape
        dev = v.vis.device
        x = self.prompt_embeddings(v, image_pad_id, bos_id)
        key_mask = torch.cat([v.vis_mask, torch.ones(b, 1, dtype=torch.bool, device=dev)], dim=1)
        mask = key_mask[:, None, None, :] | torch.eye(p + 1, dtype=torch.bool, device=dev)[None, None]
        hidden, kv = self.run_layers(x, self.prompt_positions(v), mask)
        return self.logits(hidden[:, -1]), kv, key_mask


def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def count_m(model: nn.Module) -> float:
    return round(param_count(model) / 1e6, 2)
