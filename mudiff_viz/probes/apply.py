"""One call from "a file, a page and the probe knobs" to the page the decoders see.

The CLI's ``decode --occlude/--degrade`` and the app's Perturb panel both go through
:func:`probed_page`, so a probe means the same thing everywhere: occlusion first (a PDF's words are
redacted from the file, an image's are blanked on the raster), then degradation of the result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits, current
from mudiff_viz.inputs.page import Page
from mudiff_viz.inputs.pages import load_page, read_source, sniff_kind
from mudiff_viz.probes.perturb import check_degrade, degrade, occlude, occlude_pdf

DECODE_DPI = 150.0  # the pages the decoders see; a degraded DPI at or above it is no change


@dataclass(frozen=True)
class ProbeSpec:
    """What to do to a page before decoding it. Empty by default (the page as it is)."""

    occlude_words: tuple[int, ...] | None = None  # word indices in reading order
    occlude_fraction: float | None = None  # or a seeded share of all words
    degrade: dict = field(default_factory=dict)  # dpi / blur / noise / jpeg / rotate
    seed: int = 0

    @property
    def occludes(self) -> bool:
        return bool(self.occlude_words) or bool(self.occlude_fraction)

    @property
    def active(self) -> bool:
        return self.occludes or bool(self.degrade)

    def describe(self) -> str:
        """One line for status texts: what was done to the page."""
        parts = []
        if self.occlude_words:
            parts.append(f"{len(self.occlude_words)} word{'' if len(self.occlude_words) == 1 else 's'} occluded")
        elif self.occlude_fraction:
            parts.append(f"{100 * self.occlude_fraction:g}% of words occluded (seed {self.seed})")
        if self.degrade:
            parts.append("degraded: " + ", ".join(f"{k}={v:g}" for k, v in self.degrade.items()))
        return "; ".join(parts)


def parse_word_list(text: str | None) -> tuple[int, ...] | None:
    """``"3, 17,20"`` -> (3, 17, 20); blank -> None; anything else is a one-line error."""
    if text is None or not str(text).strip():
        return None
    try:
        words = tuple(sorted({int(w) for w in str(text).replace(";", ",").split(",") if w.strip()}))
    except ValueError:
        raise UserInputError(f"occluded words are comma-separated word numbers, got {str(text)[:60]!r}") from None
    return words or None


def probe_spec(occlude_words: str | None = None, occlude_fraction: float | None = None, dpi: float | None = None,
               blur: float = 0.0, noise: float = 0.0, jpeg: int | None = None, rotate: float = 0.0,
               seed: int = 0) -> ProbeSpec:
    """A ProbeSpec from the app's knob values (0 or blank = off), checked."""
    words = parse_word_list(occlude_words)
    fraction = float(occlude_fraction or 0.0)
    if math.isnan(fraction) or not 0.0 <= fraction <= 1.0:
        raise UserInputError(f"occlusion fraction must be in [0, 1], got {occlude_fraction}")
    for name, value in (("degraded DPI", dpi), ("blur", blur), ("noise", noise), ("jpeg quality", jpeg),
                        ("rotation", rotate), ("probe seed", seed)):
        if value is not None and not math.isfinite(float(value)):  # NaN compares False with every bound
            raise UserInputError(f"{name} must be a finite number, got {value}")
    knobs: dict = {}
    if dpi and float(dpi) < DECODE_DPI:
        knobs["dpi"] = float(dpi)
    for name, value in (("blur", blur), ("noise", noise), ("rotate", rotate)):
        if value:
            knobs[name] = float(value)
    if jpeg:
        knobs["jpeg"] = int(jpeg)
    return ProbeSpec(occlude_words=words, occlude_fraction=None if words or not fraction else fraction, degrade=knobs,
                     seed=int(seed or 0))


def probed_page(source, page_index: int = 0, dpi: float = 150, spec: ProbeSpec | None = None,
                limits: Limits | None = None, base: Page | None = None) -> Page:
    """The page to decode: loaded (or ``base``, the same page already loaded), occluded, then degraded.

    A PDF's occluded words are redacted from the file (so the glyphs are truly gone) and the page
    rendered again; an image's are blanked on the raster. The ground truth keeps every word.
    """
    limits = limits or current()
    spec = spec or ProbeSpec()
    if spec.degrade:  # bad knobs fail before any work
        check_degrade(spec.degrade.get("dpi"), spec.degrade.get("blur", 0.0), spec.degrade.get("noise", 0.0),
                      spec.degrade.get("jpeg"), spec.degrade.get("rotate", 0.0), dpi)
    words = list(spec.occlude_words) if spec.occlude_words else None
    fraction = None if words else spec.occlude_fraction
    occluding = words is not None or fraction is not None
    if occluding and sniff_kind(read_source(source, limits)[0]) == "pdf":
        data, name = read_source(source, limits)
        page = occlude_pdf(data, page_index, words=words, fraction=fraction, seed=spec.seed, dpi=dpi, limits=limits,
                           source=name).page
    else:
        page = base if base is not None else load_page(source, page_index=page_index, dpi=dpi, limits=limits)
        if occluding:
            page = occlude(page, words=words, fraction=fraction, seed=spec.seed).page
    if spec.degrade:
        page = degrade(page, seed=spec.seed, **spec.degrade).page
    return page
