"""Model spec string -> backend, loaded once per process and shared by the app and the CLI.

Specs:
  ``nano`` (default)        the default embedded pair in assets/models (diffusion or AR twin by decoder)
  ``nano-diffusion``, ``nano-ar``  one twin explicitly
  ``nano-char``             the character pair (a pure glyph reader), and
  ``nano-char-diffusion``, ``nano-char-ar``
  ``nano-subword``          the subword pair (subword tokens, paragraph regions, plain positions), and
  ``nano-subword-diffusion``, ``nano-subword-ar``
  a directory               recognised from its config.json: a nano model, ``mineru_diffusion``
                            (MinerU-Diffusion) or ``qwen2_vl`` (MinerU2.5); never from its name
  a hub id (owner/name)     downloaded through huggingface_hub when the network allows
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from models.base import Backend
from mudiff_viz.core.errors import ModelLoadError

ROOT = Path(__file__).resolve().parent.parent
NANO_DIR = ROOT / "assets" / "models"
HUB_ALIASES = {
    "mineru-diffusion": "opendatalab/MinerU-Diffusion-V1-0320-2.5B",
    "mineru2.5": "opendatalab/MinerU2.5-2509-1.2B",
}

# which shipped weights (assets/models/<weights>-<twin>) each embedded family name loads. "nano" stays
# the character pair until the subword pair's diffusion twin meets its targets (docs/nano-models.md).
SHIPPED = {"nano": "nano-char", "nano-char": "nano-char", "nano-subword": "nano-subword"}

_cache: dict[tuple[str, str, str], object] = {}
_lock = threading.Lock()


def default_device() -> str:
    """CUDA when present (bfloat16 there), else CPU (float32); ``MUDIFF_DEVICE`` overrides."""
    env = os.environ.get("MUDIFF_DEVICE")
    if env:
        return env
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def model_kind(model_dir: Path) -> str:
    """The registered model type of a directory, from its config.json ``model_type`` (never from
    its name). The character pair's configs predate ``model_type`` and are told by their fields."""
    cfg_path = model_dir / "config.json"
    if not cfg_path.is_file():
        raise ModelLoadError(f"{model_dir} has no config.json: not a model directory")
    try:
        cfg = json.loads(cfg_path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{cfg_path} is not valid JSON: {exc}") from None
    if not isinstance(cfg, dict):
        raise ModelLoadError(f"{cfg_path} is not a JSON object")
    model_type = cfg.get("model_type")
    if model_type is None and "conv_channels" in cfg and cfg.get("kind") in ("ar", "diffusion"):
        return "nano_char"
    if model_type not in BACKEND_TYPES:
        raise ModelLoadError(f"{cfg_path}: unsupported model_type {model_type!r} (known: {', '.join(BACKEND_TYPES)})")
    return model_type


def resolve_dir(spec: str) -> Path:
    """A local directory for a spec: the path itself, or a hub snapshot (offline: a clear error)."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    repo = HUB_ALIASES.get(spec, spec)
    if repo.count("/") != 1 or path.exists():
        raise ModelLoadError(f"unknown model {spec!r}: not 'nano', a model directory or a hub id (owner/name)")
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("MUDIFF_ALLOW_HUB") != "1":
        raise ModelLoadError(
            f"{repo} is not a local directory and hub downloads are off "
            "(set MUDIFF_ALLOW_HUB=1 and unset HF_HUB_OFFLINE to download it, or pass a local path)"
        )
    try:
        from huggingface_hub import snapshot_download

        return Path(
            snapshot_download(repo, allow_patterns=["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model"])
        )
    except Exception as exc:  # network errors, missing repo, auth
        raise ModelLoadError(f"cannot download {repo}: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None


@dataclass(frozen=True)
class BackendType:
    """A model type the registry can load: ``factory(model_dir, device, spec) -> Backend``."""

    factory: Callable[[Path, str, str], Backend]
    wrong_decoder: str = ""  # what to say when the weights cannot run the requested decoder


BACKEND_TYPES: dict[str, BackendType] = {}


def register_backend(model_type: str, factory: Callable[[Path, str, str], Backend], wrong_decoder: str = "") -> None:
    """Make directories whose config.json says ``model_type`` loadable by ``--model DIR``."""
    BACKEND_TYPES[model_type] = BackendType(factory, wrong_decoder)


def load_backend(spec: str = "nano", kind: str = "diffusion", device: str | None = None) -> Backend:
    """The backend for a spec, serving decoders of ``kind`` ("diffusion" or "ar" weights), loaded
    once per process (thread-safe)."""
    device = device or default_device()
    key = (spec, kind, device)
    with _lock:
        if key not in _cache:
            _cache[key] = _load(spec, kind, device)
        return _cache[key]


def _load(spec: str, kind: str, device: str) -> Backend:
    for family, weights in SHIPPED.items():
        if spec in (family, f"{family}-diffusion", f"{family}-ar"):
            twin = kind if spec == family else spec.rsplit("-", 1)[1]
            if twin != kind:
                raise ModelLoadError(f"{spec} is the {twin} twin; it cannot run the {kind} decoder")
            model_dir = NANO_DIR / f"{weights}-{twin}"
            return BACKEND_TYPES[model_kind(model_dir)].factory(model_dir, device, spec)
    model_dir = resolve_dir(spec)
    model_type = model_kind(model_dir)
    entry = BACKEND_TYPES[model_type]
    backend = entry.factory(model_dir, device, spec)
    if backend.kind != kind:
        raise ModelLoadError(entry.wrong_decoder or f"{spec} holds {backend.kind} weights; it cannot run the {kind} decoder")
    return backend


# Factories import their backend when first used: the MinerU backends pull in transformers (seconds).
def _nano(model_dir: Path, device: str, spec: str) -> Backend:
    from models.nano.backend import NanoBackend

    return NanoBackend(model_dir, device=device, spec=spec)


def _nano_char(model_dir: Path, device: str, spec: str) -> Backend:
    from models.nano_char.backend import NanoCharBackend

    return NanoCharBackend(model_dir, device=device, spec=spec)


def _mineru_diffusion(model_dir: Path, device: str, spec: str) -> Backend:
    from models.mineru_diffusion.backend import MinerUDiffusionBackend

    return MinerUDiffusionBackend(model_dir, device=device, spec=spec)


def _mineru25(model_dir: Path, device: str, spec: str) -> Backend:
    from models.mineru25.backend import MinerU25Backend

    return MinerU25Backend(model_dir, device=device, spec=spec)


register_backend("nano", _nano)
register_backend("nano_char", _nano_char)
register_backend("mineru_diffusion", _mineru_diffusion,
                 "this is MinerU-Diffusion: use --decoder diffusion (try --strategy left_to_right for AR order), "
                 "or pass a MinerU2.5 checkpoint for the AR decoder")
register_backend("qwen2_vl", _mineru25, "this is MinerU2.5 (Qwen2-VL, autoregressive): use --decoder ar")


def twin_dir(family: str, twin: str) -> Path:
    """Where an embedded family's twin (``ar`` or ``diffusion``) lives: assets/models/<weights>-<twin>."""
    return Path(NANO_DIR) / f"{SHIPPED[family]}-{twin}"


def twin_installed(family: str, twin: str) -> bool:
    """Whether that twin's config.json and weights are there."""
    d = twin_dir(family, twin)
    return (d / "config.json").is_file() and (d / "model.safetensors").is_file()


def family_installed(family: str) -> bool:
    """Whether both twins of an embedded family are installed."""
    return all(twin_installed(family, twin) for twin in ("ar", "diffusion"))


def embedded_families() -> list[str]:
    """The embedded family names the app offers: ``nano`` first, then each other shipped pair whose
    weights differ from the default's and are installed (both twins)."""
    others = [family for family, weights in SHIPPED.items()
              if family != "nano" and weights != SHIPPED["nano"] and family_installed(family)]
    return ["nano"] + others


def configured_models() -> list[str]:
    """Model specs the app offers: the embedded pairs plus any in ``MUDIFF_MODELS`` (comma-separated)."""
    extra = [s.strip() for s in os.environ.get("MUDIFF_MODELS", "").split(",") if s.strip()]
    embedded = embedded_families()
    return embedded + [s for s in extra if s not in embedded]
