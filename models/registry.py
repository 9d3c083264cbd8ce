"""Model spec string -> backend, loaded once per process and shared by the app and the CLI.

Specs:
  ``nano`` (default)        the embedded subword pair in assets/models (diffusion or AR twin by decoder)
  ``nano-diffusion``, ``nano-ar``  one twin explicitly
  ``nano-char``             the earlier character pair (a pure glyph reader), and
  ``nano-char-diffusion``, ``nano-char-ar``
  a directory               recognised from its config.json: a nano model, ``mineru_diffusion``
                            (MinerU-Diffusion) or ``qwen2_vl`` (MinerU2.5); never from its name
  a hub id (owner/name)     downloaded through huggingface_hub when the network allows
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from mudiff_viz.core.errors import ModelLoadError

ROOT = Path(__file__).resolve().parent.parent
NANO_DIR = ROOT / "assets" / "models"
HUB_ALIASES = {
    "mineru-diffusion": "opendatalab/MinerU-Diffusion-V1-0320-2.5B",
    "mineru2.5": "opendatalab/MinerU2.5-2509-1.2B",
}

# which shipped weights each embedded family name loads (the subword pair replaces "nano" once its
# weights are in assets/models; until then "nano" is the character pair)
SHIPPED = {"nano": "nano-char", "nano-char": "nano-char"}

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
    """'nano', 'mineru_diffusion' or 'qwen2_vl', from the directory's config.json."""
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
    if model_type in ("mineru_diffusion", "qwen2_vl"):
        return model_type
    if model_type == "nano":
        return "nano"
    if "conv_channels" in cfg and cfg.get("kind") in ("ar", "diffusion"):
        return "nano_char"
    raise ModelLoadError(f"{cfg_path}: unsupported model_type {model_type!r} (expected mineru_diffusion or qwen2_vl)")


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


def load_backend(spec: str = "nano", decoder: str = "diffusion", device: str | None = None):
    """The backend for a spec and decoder, loaded once per process (thread-safe)."""
    if decoder not in ("diffusion", "ar"):
        raise ModelLoadError(f"decoder must be 'diffusion' or 'ar', got {decoder!r}")
    device = device or default_device()
    key = (spec, decoder, device)
    with _lock:
        if key not in _cache:
            _cache[key] = _load(spec, decoder, device)
        return _cache[key]


def _load(spec: str, decoder: str, device: str):
    for family in ("nano", "nano-char"):
        if spec in (family, f"{family}-diffusion", f"{family}-ar"):
            kind = decoder if spec == family else spec.rsplit("-", 1)[1]
            if kind != decoder:
                raise ModelLoadError(f"{spec} is the {kind} twin; it cannot run the {decoder} decoder")
            weights = SHIPPED[family]
            return _nano_backend(weights, NANO_DIR / f"{weights}-{kind}", device, spec)
    model_dir = resolve_dir(spec)
    kind = model_kind(model_dir)
    if kind in ("nano", "nano_char"):
        backend = _nano_backend(kind.replace("_", "-"), model_dir, device, spec)
        if backend.kind != decoder:
            raise ModelLoadError(f"{spec} holds the nano {backend.kind} twin; it cannot run the {decoder} decoder")
        return backend
    if kind == "mineru_diffusion":
        if decoder != "diffusion":
            raise ModelLoadError(
                f"{spec} is MinerU-Diffusion: use --decoder diffusion (try --strategy left_to_right for AR order), "
                "or pass a MinerU2.5 checkpoint for the AR decoder"
            )
        from models.mineru_diffusion.backend import MinerUDiffusionBackend

        return MinerUDiffusionBackend(model_dir, device=device, spec=spec)
    if decoder != "ar":
        raise ModelLoadError(f"{spec} is MinerU2.5 (Qwen2-VL, autoregressive): use --decoder ar")
    from models.mineru25.backend import MinerU25Backend

    return MinerU25Backend(model_dir, device=device, spec=spec)


def _nano_backend(family: str, model_dir: Path, device: str, spec: str):
    if family == "nano":
        from models.nano.backend import NanoBackend

        return NanoBackend(model_dir, device=device, spec=spec)
    from models.nano_char.backend import NanoCharBackend

    return NanoCharBackend(model_dir, device=device, spec=spec)


def configured_models() -> list[str]:
    """Model specs the app offers: the nano pair plus any in ``MUDIFF_MODELS`` (comma-separated)."""
    extra = [s.strip() for s in os.environ.get("MUDIFF_MODELS", "").split(",") if s.strip()]
    return ["nano"] + [s for s in extra if s != "nano"]
