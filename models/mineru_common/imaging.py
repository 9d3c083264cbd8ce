"""Region pixels -> vision-tower input, with the Qwen2-VL pixel budget of the release.

Uses transformers' PIL image processor (``Qwen2VLImageProcessorPil``): the torchvision-backed one
does not import beside the CPU torch wheel. The layout pass sees the whole page resized to
1036 x 1036; recognition sees a crop at native resolution, rotated upright, with extremely thin crops
padded and then tiny ones upscaled, in the release's two-stage client's order (:func:`fit_edges`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from PIL import Image

from models.mineru_common.checkpoint import read_json
from models.mineru_common.tasks import LAYOUT_IMAGE_SIZE
from mudiff_viz.core.errors import ModelLoadError, UserInputError
from mudiff_viz.core.types import Region

MIN_PIXELS = 3136  # release values (docs/real-models.md#images): 4 to 2048 image tokens
MAX_PIXELS = 1_605_632
MIN_EDGE = 28
MAX_EDGE_RATIO = 50


@dataclass
class VisionInput:
    pixel_values: torch.Tensor  # (n_patches, channels * temporal * patch * patch), float32
    grid_thw: torch.Tensor  # (1, 3): temporal, height, width in patches
    n_tokens: int  # LLM tokens after the 2 x 2 merge
    size: tuple[int, int]  # (width, height) the model saw


class ImagePreprocessor:
    """The checkpoint's preprocessor_config.json, applied with the PIL backend."""

    def __init__(self, config: dict | None, patch_size: int, temporal_patch_size: int, merge_size: int) -> None:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        cfg = dict(config or {})
        size = cfg.get("size") if isinstance(cfg.get("size"), dict) else {}
        self.min_pixels = int(
            cfg.get("min_pixels") or size.get("min_pixels") or size.get("shortest_edge") or MIN_PIXELS
        )
        self.max_pixels = int(cfg.get("max_pixels") or size.get("max_pixels") or size.get("longest_edge") or MAX_PIXELS)
        for key, want in (
            ("patch_size", patch_size),
            ("temporal_patch_size", temporal_patch_size),
            ("merge_size", merge_size),
        ):
            if key in cfg and int(cfg[key]) != want:
                raise ModelLoadError(f"preprocessor_config.json {key}={cfg[key]} but the vision config says {want}")
        kwargs = {
            k: cfg[k] for k in ("image_mean", "image_std", "rescale_factor", "do_normalize", "do_rescale") if k in cfg
        }
        self.merge_size = merge_size
        self.processor = Qwen2VLImageProcessorPil(
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
            patch_size=patch_size,
            temporal_patch_size=temporal_patch_size,
            merge_size=merge_size,
            **kwargs,
        )

    @classmethod
    def from_dir(cls, model_dir: Path, patch_size: int, temporal_patch_size: int, merge_size: int) -> ImagePreprocessor:
        return cls(
            read_json(model_dir / "preprocessor_config.json", required=False),
            patch_size,
            temporal_patch_size,
            merge_size,
        )

    def region_image(self, page_image: Image.Image, region: Region) -> Image.Image:
        """What the model looks at for a region: the resized page (layout) or an upright crop."""
        image = page_image.convert("RGB")
        if region.kind == "layout":
            return image.resize(LAYOUT_IMAGE_SIZE, Image.Resampling.BICUBIC)
        x0, y0, x1, y1 = region.bbox
        box = (
            max(0, math.floor(x0)),
            max(0, math.floor(y0)),
            min(image.width, math.ceil(x1)),
            min(image.height, math.ceil(y1)),
        )
        if box[2] - box[0] < 1 or box[3] - box[1] < 1:
            raise UserInputError(f"region {tuple(round(v) for v in region.bbox)} lies outside the page")
        if box != (0, 0, image.width, image.height):
            image = image.crop(box)
        angle = int(region.meta.get("angle") or 0)
        if angle in (90, 180, 270):
            image = image.rotate(angle, expand=True)
        return fit_edges(image)

    def __call__(self, image: Image.Image) -> VisionInput:
        try:
            out = self.processor(images=[image], return_tensors="pt")
        except ValueError as exc:  # e.g. aspect ratio beyond 200
            raise UserInputError(f"cannot prepare the image for the model: {exc}") from None
        thw = out["image_grid_thw"].long()
        t, h, w = (int(v) for v in thw[0])
        patch = self.processor.patch_size
        return VisionInput(
            pixel_values=out["pixel_values"].float(),
            grid_thw=thw,
            n_tokens=t * h * w // (self.merge_size**2),
            size=(w * patch, h * patch),
        )


def fit_edges(image: Image.Image) -> Image.Image:
    """Bring a crop into the range the image processor accepts, in the release's order.

    1. An extremely thin crop (long edge over 50x the short one) is padded with white, centred,
       until the short edge is ceil(long / 50).
    2. Then a crop whose short edge is under 28 px is upscaled (bicubic) by 28 / short edge, each
       edge rounded.
    Padding first keeps the glyphs' scale: a 600 x 10 strip becomes 600 x 12, then 1400 x 28
    (upscaling first would give 1680 x 34). docs/real-models.md#crop-fitting has the table.
    """
    w, h = image.size
    if max(w, h) / min(w, h) > MAX_EDGE_RATIO:
        nw, nh = (w, math.ceil(w / MAX_EDGE_RATIO)) if w > h else (math.ceil(h / MAX_EDGE_RATIO), h)
        canvas = Image.new(image.mode, (nw, nh), (255, 255, 255))
        canvas.paste(image, ((nw - w) // 2, (nh - h) // 2))
        image, w, h = canvas, nw, nh
    if min(w, h) < MIN_EDGE:
        scale = MIN_EDGE / min(w, h)
        image = image.resize((round(w * scale), round(h * scale)), Image.Resampling.BICUBIC)
    return image
