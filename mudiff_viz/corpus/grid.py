"""The probe grid of a corpus run: which variants of every page to decode, and how to make one.

A variant is a Semantic Shuffle level x occluded word fraction x degradation x seed, applied in
that order (as the probe benchmark does, probes/bench.py). Level 0 is the page as loaded (no
re-render); the untouched page (level 0, no occlusion, no degradation) does not depend on the seed
and is decoded once, as seed 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits
from mudiff_viz.inputs.page import Page
from mudiff_viz.inputs.pages import load_page
from mudiff_viz.probes.bench import CLEAN, degrade_name
from mudiff_viz.probes.perturb import DEGRADE_KNOBS, check_degrade, degrade, occlude, parse_degrade
from mudiff_viz.probes.shuffle import check_level, shuffle_page


@dataclass(frozen=True)
class Variant:
    level: float = 0.0
    occlusion: float = 0.0
    degrade: str = CLEAN  # canonical spec (probes.bench.degrade_name) or "none"
    seed: int = 0

    @property
    def label(self) -> str:
        return f"shuffle={self.level:g};occlude={self.occlusion:g};degrade={self.degrade};seed={self.seed}"

    @property
    def untouched(self) -> bool:
        return self.level == 0 and self.occlusion == 0 and self.degrade == CLEAN


@dataclass(frozen=True)
class ProbeGrid:
    levels: tuple[float, ...] = (0.0,)
    occlusions: tuple[float, ...] = (0.0,)
    degradations: tuple[str, ...] = (CLEAN,)  # canonical specs
    seeds: tuple[int, ...] = (0,)

    @staticmethod
    def build(levels: Sequence[float] = (0.0,), occlusions: Sequence[float] = (0.0,),
              degradations: Sequence[str | dict] = (), seeds: int | Sequence[int] = 1) -> "ProbeGrid":
        """A checked grid. ``degradations``: specs such as ``"dpi=72,blur=1"`` or knob dicts ("none"
        is always in); ``seeds``: a count (0..N-1) or explicit seeds."""
        seed_list = tuple(range(seeds)) if isinstance(seeds, int) else tuple(seeds)
        if not seed_list:
            raise UserInputError("the probe grid needs at least one seed")
        for f in occlusions:
            if not 0.0 <= f <= 1.0:
                raise UserInputError(f"occlusion fraction must be in [0, 1], got {f:g}")
        specs = [CLEAN] + [canonical_degrade(d) for d in degradations]
        return ProbeGrid(
            levels=tuple(sorted({check_level(v) for v in levels or (0.0,)})),
            occlusions=tuple(sorted({float(f) for f in occlusions or (0.0,)})),
            degradations=tuple(dict.fromkeys(specs)),
            seeds=seed_list,
        )

    def variants(self) -> list[Variant]:
        out = []
        for level in self.levels:
            for occlusion in self.occlusions:
                for spec in self.degradations:
                    for seed in self.seeds:
                        v = Variant(level, occlusion, spec, seed)
                        if not (v.untouched and seed != self.seeds[0]):
                            out.append(replace(v, seed=0) if v.untouched else v)
        return out


def canonical_degrade(spec: str | dict) -> str:
    """One spelling per degradation ("none" for none), so equal settings give equal page ids; the
    values are checked here, before any page is decoded (the DPI again per page, against its own)."""
    if isinstance(spec, str):
        spec = {} if spec.strip() == CLEAN else parse_degrade(spec)
    k = {"dpi": None, "blur": 0.0, "noise": 0.0, "jpeg": None, "rotate": 0.0, **spec}
    check_degrade(k["dpi"], k["blur"], k["noise"], None if k["jpeg"] is None else int(k["jpeg"]), k["rotate"], math.inf)
    return degrade_name({k: spec[k] for k in DEGRADE_KNOBS if k in spec})


@dataclass
class VariantPage:
    page: Page
    gt_text: str | None


def make_variant(data: bytes, name: str, page_index: int, variant: Variant, dpi: float, gt_text: str | None,
                 limits: Limits) -> VariantPage:
    """The page to decode for one variant, with its ground truth (the shuffled text when shuffled).

    Files are untrusted: PDF work runs in the isolated worker process.
    """
    if variant.level:
        shuffled = shuffle_page(data, variant.level, variant.seed, page_index=page_index, dpi=dpi, gt_text=gt_text,
                                limits=limits)
        page, gt = shuffled.page, shuffled.gt_text
    else:
        page = load_page(data, page_index=page_index, dpi=dpi, limits=limits)
        gt = page.text if page.text is not None else gt_text
    page = replace(page, source=name)
    if variant.occlusion:
        page = occlude(page, fraction=variant.occlusion, seed=variant.seed).page
    if variant.degrade != CLEAN:
        page = degrade(page, seed=variant.seed, **parse_degrade(variant.degrade)).page
    return VariantPage(page, gt)
