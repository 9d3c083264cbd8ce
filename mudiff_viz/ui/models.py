"""The model picker: which specs the app offers, and whether the embedded nano weights are installed."""

from __future__ import annotations

from pathlib import Path

from models import registry
from models.registry import configured_models
from mudiff_viz.core.errors import ModelLoadError


def nano_dir(decoder: str) -> Path:
    return Path(registry.NANO_DIR) / f"{registry.SHIPPED['nano']}-{decoder}"


def nano_installed(decoder: str) -> bool:
    d = nano_dir(decoder)
    return (d / "config.json").is_file() and (d / "model.safetensors").is_file()


def missing_message(decoder: str) -> str:
    return (
        f"The embedded nano {decoder} weights are not installed ({nano_dir(decoder)} is missing). "
        "Train them with python -m models.nano.train (see README), point MUDIFF_MODELS at a checkpoint "
        "directory, or replay a saved trace in the Trace viewer tab."
    )


def choices() -> list[tuple[str, str]]:
    """(label, spec) pairs: the nano pair first, then MUDIFF_MODELS entries."""

    out = []
    for spec in configured_models():
        if spec == "nano":
            ok = nano_installed("diffusion") and nano_installed("ar")
            out.append(("nano (embedded)" if ok else "nano (weights not installed)", "nano"))
        else:
            out.append((spec, spec))
    return out


def check(spec: str, decoder: str) -> None:
    """Raise ModelLoadError with a clear message when the chosen nano twin is missing."""

    if spec in ("nano", f"nano-{decoder}") and not nano_installed(decoder):
        raise ModelLoadError(missing_message(decoder))
