"""The model picker: which specs the app offers, and whether the embedded nano weights are installed."""

from __future__ import annotations

from models import registry
from models.registry import configured_models
from mudiff_viz.core.errors import ModelLoadError

# what each embedded pair is, for the picker (the default family is labelled by the weights it loads);
# short, so the chosen label fits the box
FAMILY_LABELS = {
    "nano-char": "character pair",
    "nano-subword": "subword pair, experimental",
}

# The real models the page intro names: listed in the picker even when no checkpoint is configured,
# so a newcomer sees they exist and how to enable them (choosing one says how, in one line).
REAL_MODELS = (
    ("MinerU-Diffusion-V1 2.5B", "mineru-diffusion", "MinerU-Diffusion-V1-0320-2.5B"),
    ("MinerU2.5 1.2B (AR)", "mineru2.5", "MinerU2.5-2509-1.2B"),
)
SETUP = "setup:"  # the value of a real model's entry while it is not configured


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
    return f"{spec} · {what}" if what else spec


def choices() -> list[tuple[str, str]]:
    """(label, spec) pairs: the embedded pairs first, then MUDIFF_MODELS entries."""
    return [(label(spec), spec) for spec in configured_models()]


def setup_message(alias: str) -> str:
    name, _, folder = next(m for m in REAL_MODELS if m[1] == alias)
    return (f"{name} is not set up in this app: start it with MUDIFF_MODELS=/path/to/{folder} (a downloaded "
            "checkpoint; several are comma-separated), see docs/real-models.md")


def picker_choices() -> list[tuple[str, str]]:
    """What the model pickers list: :func:`choices`, then each real model that is not configured,
    labelled with how to enable it (its value makes a run say so in one line)."""
    offered = choices()
    specs = " ".join(spec.lower() for _, spec in offered)
    extra = [(f"{name} · not set up: MUDIFF_MODELS", SETUP + alias) for name, alias, folder in REAL_MODELS
             if alias not in specs and folder.lower() not in specs]
    return offered + extra


def check(spec: str, decoder: str) -> None:
    """Raise ModelLoadError with a clear message when the chosen embedded twin is missing, or when
    the choice is a real model's "not set up" entry."""
    if spec.startswith(SETUP):
        raise ModelLoadError(setup_message(spec[len(SETUP):]))
    from mudiff_viz.decoding.decoders import get_decoder

    family = family_of(spec)
    for weights in get_decoder(decoder).weights:  # a speculative decoder also runs its family's AR twin
        if family is not None and not registry.twin_installed(family, weights):
            raise ModelLoadError(missing_message(weights, family))


# What a visitor's first Run decodes: the subword pair's self-speculative decoder reads (about 1% CER on the
# held-out pages) and shows drafts accepted and rejected on the page; the character pair fills most blocks in
# one step, so its default decoder stays plain diffusion (docs/app.md, "The default run").
FIRST_RUN = (("nano-subword", "self-speculative"),)


def default_choice(model_choices: list[tuple[str, str]]) -> tuple[str | None, str]:
    """(model spec, decoder) the Decode tab starts on: the first of FIRST_RUN that is offered, else the
    first model with the diffusion decoder."""
    offered = [spec for _, spec in model_choices]
    for spec, decoder in FIRST_RUN:
        if spec in offered:
            return spec, decoder
    return (offered[0] if offered else None), "diffusion"
