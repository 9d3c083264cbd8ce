"""``spaces.GPU`` when the ``spaces`` package is present (Hugging Face Spaces), else a no-op.

Import this module before anything initialises CUDA. The decorated functions return plain,
picklable CPU data (Trace objects), as ZeroGPU requires. Off ZeroGPU ``spaces.GPU`` does nothing.
On ZeroGPU the call runs in another process, so the app passes no progress callback into it.
"""

from __future__ import annotations

import os
from typing import Callable

ON_ZERO_GPU = bool(os.environ.get("SPACES_ZERO_GPU"))

try:  # pragma: no cover - only on Spaces
    import spaces  # noqa: F401

    def gpu(fn: Callable, duration: int = 120) -> Callable:
        return spaces.GPU(duration=duration)(fn)

except Exception:  # ImportError, or a spaces package that cannot start here

    def gpu(fn: Callable, duration: int = 120) -> Callable:
        return fn
