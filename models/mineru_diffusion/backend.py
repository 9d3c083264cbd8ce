"""MinerU-Diffusion behind the diffusion-backend protocol: one region (page or layout block), or
several regions of a page as one batch (models/mineru_diffusion/batch.py).

``encode`` runs the vision tower, the projector and the block-causal prompt prefill into a KV cache;
``block_logits`` forwards a block against the cache without storing it; ``commit_block`` stores
it. One region runs the one-row path (eager, or the static/CUDA-graph forwards); a batch always
runs eagerly over a left-padded cache with per-row positions and key masks. Draft-and-verify
(``spec_forward``/``keep``) is one row only. Everything that identifies tokens (mask, image, stop
ids) and the prompt format comes from the checkpoint's own files. CPU runs in float32, CUDA in
bfloat16.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from models.base import SpecLayout, SpecLogits, StepPolicy
from models.mineru_common.backend import MinerUBackend
from models.mineru_common.checkpoint import check_keys, load_state_dict, read_json
from models.mineru_common.device import dtype_for, graphs_wanted
from models.mineru_common.imaging import ImagePreprocessor
from models.mineru_common.tasks import RELEASE_TASK_TOKENS, TEXT_PROMPT
from models.mineru_common.text import ChatText
from models.mineru_diffusion.batch import BatchKVCache, batch_block_forward, batch_prefill
from models.mineru_diffusion.graphs import BlockGraphs
from models.mineru_diffusion.model import (
    KVCache,
    MinerUDiffusion,
    MinerUDiffusionConfig,
    count_params_m,
    from_state_dict,
)
from mudiff_viz.core.errors import ModelLoadError, UserInputError
from mudiff_viz.core.types import Region

DEFAULT_BLOCK_LENGTH = 32  # the release's block length, for callers that do not say
EXEC_MODES = ("eager", "static", "cuda-graphs")


@dataclass
class DiffusionContext:
    cache: KVCache | BatchKVCache  # a BatchKVCache when several regions decode as one batch
    prompt_lens: list[int]  # per region
    image_tokens: list[int]
    image_sizes: list[tuple[int, int]]

    @property
    def batched(self) -> bool:
        return isinstance(self.cache, BatchKVCache)

    @property
    def prompt_len(self) -> int:
        """The prompt length of a one-region context."""
        if len(self.prompt_lens) != 1:
            raise ValueError("a batch has one prompt length per region (prompt_lens)")
        return self.prompt_lens[0]


class MinerUDiffusionBackend(MinerUBackend):
    """The native MinerU-Diffusion; see models/mineru_diffusion/model.py for the architecture.
    By default one region at a time (as the release runs: the pipeline decodes regions sequentially
    and merges the traces); ``batch_regions=True`` decodes them as one batch."""

    kind = "diffusion"
    can_batch_regions = True  # several regions in one batch on request (batches_regions stays False)
    prefill_follows_block_length = True  # the prompt is prefilled in blocks of the decode's block length
    task_tokens = RELEASE_TASK_TOKENS  # the release's tokens per pass of its two-stage parse

    def __init__(self, model_dir: str | Path, device: str = "cpu", spec: str | None = None) -> None:
        model_dir = Path(model_dir)
        config = read_json(model_dir / "config.json")
        if config.get("model_type") != "mineru_diffusion":
            raise ModelLoadError(f"{model_dir}: model_type {config.get('model_type')!r} is not mineru_diffusion")
        text = ChatText(model_dir, config)
        cfg = MinerUDiffusionConfig.from_dict({**config, "mask_token_id": text.mask_id(config)})
        dev = torch.device(device)
        images = ImagePreprocessor.from_dir(
            model_dir, cfg.vision.patch_size, cfg.vision.temporal_patch_size, cfg.vision.spatial_merge_size
        )
        state = load_state_dict(model_dir, dev, dtype_for(dev))
        check_keys(cfg.expected_shapes(), state, f"checkpoint {model_dir.name}")
        self._attach(from_state_dict(cfg, state, dev), text, images, dev, spec or str(model_dir))

    @classmethod
    def from_parts(
        cls, model: MinerUDiffusion, text: ChatText, images: ImagePreprocessor, spec: str,
        exec_mode: str | None = None, stop_ids: frozenset[int] | None = None,
    ) -> MinerUDiffusionBackend:
        """A backend around an already built model (the GPU check builds random full-size weights and
        runs it with graphs and without, and with no stop token so every requested block decodes)."""
        backend = cls.__new__(cls)
        backend._attach(model, text, images, next(model.parameters()).device, spec, exec_mode, stop_ids)
        return backend

    def _attach(
        self, model: MinerUDiffusion, text: ChatText, images: ImagePreprocessor, device: torch.device, spec: str,
        exec_mode: str | None = None, stop_ids: frozenset[int] | None = None,
    ) -> None:
        self.model, self.text, self.images = model, text, images
        self.cfg = model.cfg
        self.device = device
        self.spec = spec
        self.name = "mineru-diffusion"
        self.params_m = count_params_m(model)
        self.mask_id = self.cfg.mask_token_id
        self.stop_ids = text.stop_ids if stop_ids is None else stop_ids
        # the release's generate finds its stop strings in this order (the trace flags where that moves the cut)
        self.release_stop_order = text.release_stop_order if stop_ids is None else ()
        # block forwards as CUDA graphs on a GPU (MUDIFF_CUDA_GRAPHS=0: eager); None = plain eager path
        if exec_mode is None:
            exec_mode = "cuda-graphs" if graphs_wanted(device) else "eager"
        if exec_mode not in EXEC_MODES or (exec_mode == "cuda-graphs" and device.type != "cuda"):
            raise ModelLoadError(f"exec mode must be one of {', '.join(EXEC_MODES)} (cuda-graphs needs CUDA), got {exec_mode!r}")
        # "static": the fixed-shape forward the graphs replay, run eagerly (how the CPU tests check it)
        self.graphs = None if exec_mode == "eager" else BlockGraphs(model, use_graphs=exec_mode == "cuda-graphs")
        self.exec_mode = exec_mode
        vocab = self.cfg.text.vocab_size
        bad = [i for i in (self.mask_id, *self.stop_ids, self.cfg.image_token_id) if not 0 <= i < vocab]
        if bad:
            raise ModelLoadError(f"special token ids {bad} lie outside the vocabulary of {vocab}")

    # ---- protocol ----------------------------------------------------------------------------

    @property
    def dtype(self) -> torch.dtype:
        """The weights' dtype (bfloat16 on CUDA, float32 on CPU: models/mineru_common/device.py)."""
        return self.model.decoder.embed_tokens.weight.dtype

    @property
    def numerics(self) -> str:
        """The model's own numerics: the release's in bfloat16, float32 otherwise (the ``numerics`` knob)."""
        return "release" if self.dtype == torch.bfloat16 else "float32"

    @torch.inference_mode()
    def encode(self, page, regions: list[Region], block_length: int | None = None,
               numerics: str | None = None) -> DiffusionContext:
        """Each region's image through the vision tower and projector on its own (their sizes
        differ), then one prefill: the one-row cache for one region, a left-padded batch for more.
        ``numerics`` "release": every forward on the context applies RoPE in the model dtype."""
        if not regions:
            raise ValueError("no regions to decode")
        embeds, lens, n_image, sizes = [], [], [], []
        for region in regions:
            vision = self.images(self.images.region_image(page.image, region))
            ids = self.text.prompt_ids(region.prompt or TEXT_PROMPT, vision.n_tokens)
            embeds.append(self.model.prompt_embeds(torch.tensor(ids, device=self.device),
                                                   vision.pixel_values.to(self.device), vision.grid_thw.to(self.device)))
            lens.append(len(ids))
            n_image.append(vision.n_tokens)
            sizes.append(vision.size)
        block_length = block_length or DEFAULT_BLOCK_LENGTH
        in_dtype = (numerics or self.numerics) == "release"
        if len(regions) == 1:
            cache = self.model.prefill(embeds[0], block_length, in_dtype)
        else:
            cache = batch_prefill(self.model, embeds, block_length, in_dtype)
        return DiffusionContext(cache=cache, prompt_lens=lens, image_tokens=n_image, image_sizes=sizes)

    def block_logits(self, ctx: DiffusionContext, block: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return self._forward(ctx, block, rows, store=False).float()

    def commit_block(self, ctx: DiffusionContext, block: torch.Tensor, rows: torch.Tensor) -> None:
        self._forward(ctx, block, rows, store=True)

    def captured_step(self, ctx: DiffusionContext, block: torch.Tensor, rows: torch.Tensor, policy: StepPolicy,
                      step_index: int):
        """The block forward and the policy's step as one CUDA graph (graphs.py); without graphs, the
        two calls in turn (so always for a batch)."""
        if self.graphs is not None and not ctx.batched:
            _one_row(block)
            return self.graphs.step(ctx.cache, block, policy, step_index)
        return policy(self.block_logits(ctx, block, rows), block == self.mask_id, step_index)

    # draft and verify (one row; always the eager path)
    @torch.inference_mode()
    def spec_forward(self, ctx: DiffusionContext, rows: torch.Tensor, layout: SpecLayout) -> SpecLogits:
        """One forward of [clean ; verify queries ; drafts] (models/base.py: SpecLayout) at plain
        positions: clean token j at the cache's end + j, the query after ``clean[:j]`` at the position
        it predicts (what a block of one MASK there sees in the block-length-1 decode), drafts after."""
        if ctx.batched:
            raise UserInputError("MinerU-Diffusion drafts and verifies one region at a time (no batch)")
        _one_row(layout.clean)
        return layout.split(self.model.spec_forward(ctx.cache, layout, self.mask_id).float())

    def keep(self, ctx: DiffusionContext, rows: torch.Tensor, n_keep: torch.Tensor) -> None:
        ctx.cache.advance(int(n_keep[0]))

    def _forward(self, ctx: DiffusionContext, block: torch.Tensor, rows: torch.Tensor,
                 store: bool) -> torch.Tensor | None:
        """The block forward: a batch's eager forward, the CUDA graphs when there are any, else the
        one-row eager path."""
        if ctx.batched:
            return batch_block_forward(self.model, ctx.cache, block, rows.tolist(), store)
        _one_row(block)
        if self.graphs is not None:
            return self.graphs.forward(ctx.cache, block, store)
        return self.model.block_forward(ctx.cache, block, store)


def _one_row(block: torch.Tensor) -> None:
    if block.shape[0] != 1:
        raise ValueError("MinerU-Diffusion decodes one region at a time (batch of 1)")
