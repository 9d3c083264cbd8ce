"""The model picker: which specs the app offers, and whether the embedded nano weights are installed."""

from __future__ import annotations

from models import registry
from models.registry import configured_models
from mudiff_viz.core.errors import ModelLoadError

# what each embedded pair is, for the picker (the default family is labelled by the weights it loads)
FAMILY_LABELS = {
    "nano-char": "character pair: a pure glyph reader",
    "nano-subword": "subword pair: paragraphs, a language prior (experimental)",
}


def family_of(spec: str) -> str | None:
    """The embedded family a spec names (``nano-subword-ar`` -> ``nano-subword``), or None."""
    for family in sorted(registry.SHIPPED, key=len, reverse=True):
        if spec in (family, f"{family}-ar", f"{family}-diffusion"):
            return family
    return None




def missing_twins(family: str = "nano") -> list[str]:
    """The twins of an embedded family whose weights are not installed."""
    return [twin for twin in ("diffusion", "ar") if not registry.twin_installed(family, twin)]


def missing_message(decoder: str, family: str = "nano") -> str:
    return (
        f"The embedded {family} {decoder} weights are not installed ({registry.twin_dir(family, decoder)} is missing). "
        "Train them with python -m nano_training.train (see README), point MUDIFF_MODELS at a checkpoint "
        "directory, or replay a saved trace in the Trace viewer tab."
    )


def label(spec: str) -> str:
    family = family_of(spec)
    if family is None:
        return spec
    if not registry.family_installed(family):
        return f"{spec} (weights not installed)"
    what = FAMILY_LABELS.get(registry.SHIPPED[family], "")
    return f"{spec} (embedded{': ' + what if what else ''})"


def choices() -> list[tuple[str, str]]:
    """(label, spec) pairs: the embedded pairs first, then MUDIFF_MODELS entries."""
    return [(label(spec), spec) for spec in configured_models()]


def check(spec: str, decoder: str) -> None:
    """Raise ModelLoadError with a clear message when the chosen embedded twin is missing."""
    family = family_of(spec)
    if family is not None and not registry.twin_installed(family, decoder):
        raise ModelLoadError(missing_message(decoder, family))
