"""``spaces.GPU`` when the ``spaces`` package is present (Hugging Face ZeroGPU), else a no-op.

Import this module before anything initialises CUDA. The decorated functions return plain,
picklable CPU data (Trace objects), as ZeroGPU requires.
"""

from __future__ import annotations

from typing import Callable

try:  # pragma: no cover - only on Spaces
    import spaces  # noqa: F401

    def gpu(fn: Callable) -> Callable:
        return spaces.GPU(duration=120)(fn)

    ON_SPACES_GPU = True
except Exception:  # ImportError, or a spaces package that cannot start here

    def gpu(fn: Callable) -> Callable:
        return fn

    ON_SPACES_GPU = False
