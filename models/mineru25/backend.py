"""MinerU2.5 (Qwen2-VL, autoregressive) behind the AR-backend protocol: the baseline for the diffusion model.

Loaded with transformers' concrete ``Qwen2VLForConditionalGeneration`` from local safetensors only
(no Auto* classes, no remote code). The key check is strict: only a tied ``lm_head`` may be absent
from the files. Prompts, chat template and pixel budget are the same shared code as the diffusion
backend, so both models see the same input. M-RoPE positions are computed once from the prompt and
then advanced explicitly, so no decoding state hides inside the shared model object.

Three ways to run the greedy loop, with the same tokens: ``eager`` (transformers' DynamicCache;
the CPU default), ``static-cache`` (a preallocated StaticCache) and ``cuda-graphs`` (the static
cache's one-token step replayed as a CUDA graph: the GPU default, so the AR baseline runs as tuned
as the diffusion model's graphs; ``MUDIFF_CUDA_GRAPHS=0`` runs both models eagerly).

Several regions decode as one batch on request (``batch_regions=True``), always eagerly: prompts
are left-padded to the longest with a padding attention mask, each row's M-RoPE positions are
computed from its own prompt alone (``get_rope_index`` per row) and advanced per row, and rows that
finish are dropped from the DynamicCache (``batch_select_indices``). Verifying drafts is one row only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from models.base import SpecLayout, SpecLogits
from models.mineru25.graphs import StaticStep
from models.mineru_common.backend import MinerUBackend
from models.mineru_common.checkpoint import read_json, weight_files
from models.mineru_common.device import dtype_for, graphs_wanted
from models.mineru_common.imaging import ImagePreprocessor
from models.mineru_common.tasks import TEXT_PROMPT
from models.mineru_common.text import ChatText
from mudiff_viz.core.errors import ModelLoadError, UserInputError
from mudiff_viz.core.limits import current
from mudiff_viz.core.types import Region

LM_HEAD = "lm_head.weight"
# MinerU2.5's client (mineru-vl-utils 2.0.x, docs/real-models.md#mineru25-as-shipped): greedy with
# no_repeat_ngram_size 100 for every task; its transformers path passes only that (and a neutral
# repetition penalty) to generate, its vLLM path adds presence and frequency penalties per task.
# The first set is the default (the ``repetition`` knob's ``auto``): the path our loop mirrors.
# (plain dicts: the decoder's repetition.RepetitionRules fields)
_NGRAM = {"no_repeat_ngram_size": 100, "repetition_penalty": 1.0}
_VLLM_TEXT = {**_NGRAM, "presence_penalty": 1.0, "frequency_penalty": 0.05}
CLIENT_REPETITION = {
    "client-hf": dict.fromkeys(("text", "table", "formula", "layout"), _NGRAM),
    "client-vllm": {"text": _VLLM_TEXT, "formula": _VLLM_TEXT, "layout": _NGRAM,
                    "table": {**_NGRAM, "presence_penalty": 1.0, "frequency_penalty": 0.005}},
}
EXEC_MODES = ("eager", "static-cache", "cuda-graphs")


@dataclass
class ARContext:
    cache: object  # transformers DynamicCache or StaticCache
    length: int  # tokens in the cache
    rope_delta: torch.Tensor  # (1, 1): M-RoPE offset of text positions after the image
    first_logits: torch.Tensor  # (1, V)
    step: StaticStep | None = None  # the static-cache step (a CUDA graph on CUDA)
    tentative: int = 0  # tokens the last spec_forward put in the cache (keep crops the rejected ones)
    prompt_ids: list[int] | None = None  # the prompt (the repetition rules look at it, as generate's do)


@dataclass
class ARBatchContext:
    """Several regions as one batch: a left-padded DynamicCache, one cache row per region still decoding."""

    cache: object  # transformers DynamicCache, rows in ``alive`` order
    attention: torch.Tensor  # (rows, slots) 1 where a cache slot is a real token of the row
    lengths: torch.Tensor  # (rows,) each row's own tokens so far (its prompt + answer)
    rope_delta: torch.Tensor  # (rows,) each row's M-RoPE text offset
    first_logits: torch.Tensor  # (B, V)
    prompt_ids: list[list[int]]
    alive: list[int]  # region index of each cache row


class MinerU25Backend(MinerUBackend):
    """MinerU2.5 through transformers' Qwen2-VL, with our KV-cached loop (one region at a time, or a batch on request)."""

    kind = "ar"
    client_repetition = CLIENT_REPETITION
    can_batch_regions = True  # several regions in one batch on request (batches_regions stays False)

    def __init__(self, model_dir: str | Path, device: str = "cpu", spec: str | None = None,
                 exec_mode: str | None = None, stop_ids: frozenset[int] | None = None) -> None:
        model_dir = Path(model_dir)
        config = read_json(model_dir / "config.json")
        if config.get("model_type") != "qwen2_vl":
            raise ModelLoadError(f"{model_dir}: model_type {config.get('model_type')!r} is not qwen2_vl")
        self.device = torch.device(device)
        dtype = dtype_for(self.device)
        self.text = ChatText(model_dir, config)
        vision_cfg = config.get("vision_config") or {}
        self.images = ImagePreprocessor.from_dir(
            model_dir,
            int(vision_cfg.get("patch_size", 14)),
            int(vision_cfg.get("temporal_patch_size", 2)),
            int(vision_cfg.get("spatial_merge_size", 2)),
        )
        weight_files(model_dir)  # safetensors present (pickles are refused) before transformers looks
        check_layer_count(config)
        self.model = _load(model_dir, config, dtype).to(self.device).eval()
        self.spec = spec or str(model_dir)
        self.name = "mineru2.5"
        self.params_m = round(sum(p.numel() for p in self.model.parameters()) / 1e6, 1)
        self.stop_ids = self.text.stop_ids if stop_ids is None else stop_ids  # none: the GPU check's fixed lengths
        if exec_mode is None:
            exec_mode = "cuda-graphs" if graphs_wanted(self.device) else "eager"
        if exec_mode not in EXEC_MODES or (exec_mode == "cuda-graphs" and self.device.type != "cuda"):
            raise ModelLoadError(f"exec mode must be one of {', '.join(EXEC_MODES)} (cuda-graphs needs CUDA), got {exec_mode!r}")
        self.exec_mode = exec_mode
        self._home, self._home_len = None, 0  # the static cache reused page after page, and its capacity
        self._step: StaticStep | None = None

    @torch.inference_mode()
    def encode(self, page, regions: list[Region], block_length: int | None = None) -> ARContext | ARBatchContext:
        if not regions:
            raise ValueError("no regions to decode")
        if len(regions) > 1:
            return self._encode_batch(page, regions)
        region = regions[0]
        vision = self.images(self.images.region_image(page.image, region))
        ids = self.text.prompt_ids(region.prompt or TEXT_PROMPT, vision.n_tokens)
        input_ids = torch.tensor([ids], device=self.device)
        grid = vision.grid_thw.to(self.device)
        kinds = (input_ids == self.text.ids.image_pad).int()
        positions, delta = self.model.model.get_rope_index(input_ids, mm_token_type_ids=kinds, image_grid_thw=grid)
        cache, step = self._static_cache(len(ids)) if self.exec_mode != "eager" else (None, None)
        out = self.model(
            input_ids=input_ids,
            pixel_values=vision.pixel_values.to(self.device),
            image_grid_thw=grid,
            position_ids=positions,
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return ARContext(cache=out.cache, length=len(ids), rope_delta=delta, first_logits=out.logits[:, -1].float(),
                         step=step, prompt_ids=ids)

    def _encode_batch(self, page, regions: list[Region]) -> ARBatchContext:
        """Each prompt's positions from its own ``get_rope_index``, then one left-padded prefill."""
        prompts, positions, deltas, pixels, grids = [], [], [], [], []
        for region in regions:
            vision = self.images(self.images.region_image(page.image, region))
            ids = self.text.prompt_ids(region.prompt or TEXT_PROMPT, vision.n_tokens)
            one = torch.tensor([ids], device=self.device)
            grid = vision.grid_thw.to(self.device)
            kinds = (one == self.text.ids.image_pad).int()
            pos, delta = self.model.model.get_rope_index(one, mm_token_type_ids=kinds, image_grid_thw=grid)
            prompts.append(ids)
            positions.append(pos)
            deltas.append(delta.view(-1)[0])
            pixels.append(vision.pixel_values.to(self.device))
            grids.append(grid)
        longest = max(len(ids) for ids in prompts)
        pad_id = prompts[0][0]  # any text token: padding slots are masked out
        input_ids = torch.full((len(regions), longest), pad_id, dtype=torch.long, device=self.device)
        attention = torch.zeros(len(regions), longest, dtype=torch.long, device=self.device)
        pos = torch.ones(3, len(regions), longest, dtype=torch.long, device=self.device)
        for r, ids in enumerate(prompts):
            input_ids[r, longest - len(ids):] = torch.tensor(ids, device=self.device)
            attention[r, longest - len(ids):] = 1
            pos[:, r, longest - len(ids):] = positions[r][:, 0]
        out = self.model(input_ids=input_ids, pixel_values=torch.cat(pixels), image_grid_thw=torch.cat(grids),
                         position_ids=pos, attention_mask=attention, use_cache=True, logits_to_keep=1)
        lengths = torch.tensor([len(ids) for ids in prompts], device=self.device)
        return ARBatchContext(cache=out.cache, attention=attention, lengths=lengths, rope_delta=torch.stack(deltas),
                              first_logits=out.logits[:, -1].float(), prompt_ids=prompts, alive=list(range(len(regions))))

    def _next_logits_batch(self, ctx: ARBatchContext, tokens: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """One token per given row; rows that stopped are dropped from the cache first."""
        want = rows.tolist()
        if want != ctx.alive:
            keep = torch.tensor([ctx.alive.index(r) for r in want], device=self.device)
            ctx.cache.batch_select_indices(keep)
            ctx.attention, ctx.lengths, ctx.rope_delta = (t.index_select(0, keep) for t in
                                                          (ctx.attention, ctx.lengths, ctx.rope_delta))
            ctx.alive = want
        pos = (ctx.rope_delta + ctx.lengths).view(1, -1, 1).expand(3, -1, 1)
        ctx.attention = torch.cat([ctx.attention, torch.ones_like(ctx.attention[:, :1])], 1)
        ctx.lengths = ctx.lengths + 1
        out = self.model(input_ids=tokens[:, None], position_ids=pos, attention_mask=ctx.attention, cache=ctx.cache,
                         use_cache=True)
        ctx.cache = out.cache
        return out.logits[:, -1].float()

    def prompt_tokens(self, ctx: ARContext | ARBatchContext) -> list[list[int]]:
        if isinstance(ctx, ARBatchContext):
            return [list(ids) for ids in ctx.prompt_ids]
        return [list(ctx.prompt_ids or [])]

    def _static_cache(self, prompt_len: int):
        """The home StaticCache, emptied, with room for the prompt and the longest answer the limits
        allow (grown, and the step recaptured, when a prompt does not fit)."""
        from transformers import StaticCache

        need = prompt_len + current().max_new_tokens
        if self._home is None or self._home_len < need:
            self._home, self._home_len = StaticCache(config=self.model.config, max_cache_len=need), need
            self._step = StaticStep(self.model, self._home, self.device, use_graph=self.exec_mode == "cuda-graphs")
        self._home.reset()
        return self._home, self._step

    def first_logits(self, ctx: ARContext) -> torch.Tensor:
        return ctx.first_logits

    def next_logits(self, ctx: ARContext | ARBatchContext, tokens: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        if isinstance(ctx, ARBatchContext):
            return self._next_logits_batch(ctx, tokens, rows)
        if tokens.shape[0] != 1:
            raise ValueError("MinerU2.5 decodes one region at a time (batch of 1)")
        pos = (ctx.rope_delta + ctx.length).view(1, 1, 1).expand(3, 1, 1).to(self.device)
        ctx.length += 1
        if ctx.step is not None:
            if ctx.step.cache is not ctx.cache:
                raise RuntimeError("this static cache was taken over by a later decode (model work must be serialised)")
            return ctx.step(tokens, pos)
        out = self.model(input_ids=tokens[:, None], position_ids=pos, cache=ctx.cache, use_cache=True)
        ctx.cache = out.cache
        return out.logits[:, -1].float()


    # verifying drafts (the speculative decoder): one causal forward of [last token ; drafts]
    @torch.inference_mode()
    def spec_forward(self, ctx: ARContext, rows: torch.Tensor, layout: SpecLayout) -> SpecLogits:
        """Logits after each clean prefix (models/base.py SpecLayout, AR side: the logits at each
        clean token); the tokens enter the cache, and :meth:`keep` crops it to the accepted prefix."""
        clean = layout.clean
        if isinstance(ctx, ARBatchContext):
            raise UserInputError("MinerU2.5 verifies drafts one region at a time (no batch)")
        if clean.shape[0] != 1 or layout.n_drafts or layout.queries_from < 1:
            raise ValueError("MinerU2.5 verifies one region's drafts after clean tokens; it cannot draft")
        if ctx.step is not None:
            raise UserInputError("MinerU2.5 verifies drafts on its eager path: set MUDIFF_CUDA_GRAPHS=0")
        n = clean.shape[1]
        pos = (ctx.rope_delta + ctx.length + torch.arange(n, device=self.device)).view(1, 1, n).expand(3, 1, n)
        out = self.model(input_ids=clean, position_ids=pos, cache=ctx.cache, use_cache=True)
        ctx.cache, ctx.tentative = out.cache, n
        return SpecLogits(out.logits[:, layout.queries_from - 1 :].float(), out.logits[:, :0].float())

    def keep(self, ctx: ARContext, rows: torch.Tensor, n_keep: torch.Tensor) -> None:
        drop = ctx.tentative - int(n_keep[0])
        ctx.length += int(n_keep[0])
        if drop:
            ctx.cache.crop(-drop)  # transformers 5: a negative count removes that many from the end
        ctx.tentative = 0


def _tied(config: dict) -> bool:
    text = config.get("text_config") or {}
    return bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))


def check_layer_count(config: dict) -> None:
    """A layer count that disagrees with the config's list of layer types, in one line (transformers
    would raise a StrictDataclassClassValidationError that names neither)."""
    for where, cfg in (("config.json", config), ("config.json text_config", config.get("text_config") or {})):
        layers, types = cfg.get("num_hidden_layers"), cfg.get("layer_types")
        if isinstance(layers, bool) or (layers is not None and (not isinstance(layers, int) or layers < 1)):
            raise ModelLoadError(f"{where} num_hidden_layers must be a positive integer, got {layers!r}")
        if layers is not None and isinstance(types, list) and len(types) != layers:
            raise ModelLoadError(f"{where} num_hidden_layers={layers} but layer_types lists {len(types)} layers")


def _shape_text(mismatch) -> str:
    """One of transformers' mismatched keys, ``(key, checkpoint shape, model shape)``, as text."""
    if isinstance(mismatch, (tuple, list)) and len(mismatch) == 3:
        key, ckpt, want = mismatch
        return f"{key} {tuple(ckpt)} in the weights, {tuple(want)} from config.json"
    return str(mismatch[0] if isinstance(mismatch, (tuple, list)) else mismatch)


def _load(model_dir: Path, config: dict, dtype: torch.dtype):
    """The concrete transformers class from local safetensors, with a strict key report."""
    from transformers import Qwen2VLForConditionalGeneration
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    verbosity = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()  # keep the CLI's stderr to its summary line
    hf_logging.set_verbosity_error()  # transformers' load report is many lines: the checks below say it in one
    try:
        model, info = Qwen2VLForConditionalGeneration.from_pretrained(
            str(model_dir),
            local_files_only=True,
            use_safetensors=True,
            dtype=dtype,
            attn_implementation="sdpa",
            output_loading_info=True,
            ignore_mismatched_sizes=True,  # wrong shapes come back in info and are refused below, by name
        )
    except Exception as exc:
        raise ModelLoadError(
            f"cannot load {model_dir.name} as Qwen2-VL: {type(exc).__name__}: {str(exc).splitlines()[0]}"
        ) from None
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar:
            hf_logging.enable_progress_bar()
    tied = _tied(config)
    missing = [k for k in info.get("missing_keys", []) if not (tied and k == LM_HEAD)]
    problems = []
    if missing:
        problems.append("missing keys: " + ", ".join(sorted(missing)[:6]))
    if info.get("unexpected_keys"):
        problems.append("unexpected keys: " + ", ".join(sorted(info["unexpected_keys"])[:6]))
    if info.get("mismatched_keys"):
        wrong = sorted(info["mismatched_keys"], key=str)
        problems.append(f"{len(wrong)} tensors of another shape, first {_shape_text(wrong[0])}")
    if problems:
        raise ModelLoadError(f"checkpoint {model_dir.name} does not match its config: " + "; ".join(problems))
    embed = model.get_input_embeddings().weight
    if tied and model.lm_head.weight.data_ptr() != embed.data_ptr():
        model.lm_head.weight = embed  # tie explicitly if transformers did not
    return model
