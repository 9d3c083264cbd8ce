"""Run by tests/test_zerogpu.py in a fresh interpreter: the app's model work as ZeroGPU runs it.

A stand-in ``spaces`` module is installed before the app is imported. Its ``GPU`` decorator does at
the boundary what ZeroGPU does: pickle the call's arguments (``pickle.dumps``), unpickle them for
the worker, ask ``duration`` with the same arguments, run, and pickle the result back. The real tab
handlers then run on tiny random nano twins with an unpicklable progress closure in hand; what
crossed the boundary is printed as JSON.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import types
from pathlib import Path

os.environ["SPACES_ZERO_GPU"] = "1"
CALLS: list[dict] = []


def GPU(duration=60):  # noqa: N802  (the spaces API's name)
    def decorate(fn):
        name = f"{fn.__module__}.{fn.__qualname__}"

        def call(*args, **kwargs):
            blob = pickle.dumps((args, kwargs))
            seconds = duration(*args, **kwargs) if callable(duration) else duration
            args2, kwargs2 = pickle.loads(blob)
            result = pickle.loads(pickle.dumps(fn(*args2, **kwargs2)))
            CALLS.append({"name": name, "bytes": len(blob), "duration": seconds})
            return result

        return call

    return decorate


spaces = types.ModuleType("spaces")
spaces.GPU = GPU
sys.modules["spaces"] = spaces

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(models_dir: str, max_tokens: int) -> None:
    import torch

    from models import registry
    from mudiff_viz.decoding.settings import preset_knobs
    from mudiff_viz.ui import compare_tab, decode_tab, gpu, shuffle_tab
    from tests.ui_support import SAMPLE, make_tiny_twins

    torch.set_num_threads(1)
    registry.NANO_DIR = make_tiny_twins(Path(models_dir))
    knobs = preset_knobs(None, {"max_new_tokens": max_tokens})
    progress = lambda *a, **k: None  # noqa: E731  (a local closure: unpicklable, as gr.Progress's callbacks are)
    outputs = {}
    outputs["decode"] = list(decode_tab.run_decode(str(SAMPLE), 1, "nano", "diffusion", knobs, progress=progress))
    outputs["compare"] = list(compare_tab.run_compare(str(SAMPLE), 1, "nano", "nano", "self-speculative", knobs, rounds=1,
                                                        progress=progress))
    outputs["shuffle"] = list(shuffle_tab.run_shuffle(str(SAMPLE), 1, 1.0, 0, "nano", knobs, progress=progress))
    outputs["bench"] = list(shuffle_tab.run_shuffle_bench([1.0], 1, "nano", knobs, progress=progress))
    print(json.dumps({"on_zero_gpu": gpu.ON_ZERO_GPU, "decorated": gpu.DECORATED, "calls": CALLS,
                      "yields": {k: len(v) for k, v in outputs.items()},
                      "last_status": {k: str(v[-1][0])[:2000] for k, v in outputs.items()}}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
