"""Run by tests/test_zerogpu.py in a fresh interpreter: the app's model work as ZeroGPU runs it.

A stand-in ``spaces`` module is installed before the app is imported. Its ``GPU`` decorator does at
the boundary what ``spaces`` 0.51 does (spaces/zero/wrappers.py, read for this):
- ``duration`` is asked with the call's arguments; a request above the per-call cap is refused
  with a ``gr.Error`` titled "ZeroGPU illegal duration";
- the call runs in a **forked** worker process: the arguments are pickled to it, the result is
  pickled back (the worker inherits the models the parent preloaded, as a fork does);
- an exception that is a ``gr.Error`` comes back as itself; any other becomes
  ``gr.Error("<ClassName>", title="ZeroGPU worker error")``, its message lost;
- a worker that outlives its duration is killed ("GPU task aborted", as the platform aborts it).
Then the real tab handlers run on tiny random nano twins with an unpicklable progress closure in
hand, and a configured model that cannot load is preloaded; what crossed is printed as JSON.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import sys
import time
import traceback
import types
from pathlib import Path

os.environ["SPACES_ZERO_GPU"] = "1"
CAP_S = 300  # what the platform accepts per call (the maintainers' figure)
DEFAULT_S = 60  # spaces' duration when none is given
CALLS: list[dict] = []
FORKED = [False]


def _worker(task, blob: bytes, conn) -> None:
    """The forked side: unpickle, run, pickle the outcome back (as spaces' thread_wrapper)."""
    import gradio as gr

    FORKED[0] = True
    args, kwargs = pickle.loads(blob)
    try:
        outcome = ("ok", task(*args, **kwargs))
    except Exception as exc:  # spaces' exception_result: a gr.Error travels, anything else only by name
        outcome = ("error", type(exc).__name__, exc if isinstance(exc, gr.Error) else None,
                   "".join(traceback.format_exception(exc)))
    try:
        conn.send_bytes(pickle.dumps(outcome))
    except Exception as exc:  # an unpicklable result fails as spaces fails it
        conn.send_bytes(pickle.dumps(("error", type(exc).__name__, None, str(exc))))
    conn.close()


def GPU(task=None, *, duration=None, size=None):  # noqa: N802  (the spaces API's name)
    if task is None:
        return lambda fn: GPU(fn, duration=duration, size=size)

    import gradio as gr

    name = f"{task.__module__}.{task.__qualname__}"

    def call(*args, **kwargs):
        if FORKED[0]:  # a decorated call inside a worker runs in place, as in spaces
            return task(*args, **kwargs)
        seconds = duration(*args, **kwargs) if callable(duration) else duration
        seconds = DEFAULT_S if seconds is None else seconds
        record = {"name": name, "duration": seconds, "pid": os.getpid()}
        CALLS.append(record)
        if seconds > CAP_S:
            record["outcome"] = "illegal duration"
            raise gr.Error(f"The requested GPU duration ({seconds}s) is larger than the maximum allowed",
                           title="ZeroGPU illegal duration")
        blob = pickle.dumps((args, kwargs))
        record["bytes"] = len(blob)
        ctx = multiprocessing.get_context("fork")
        here, there = ctx.Pipe(duplex=False)
        worker = ctx.Process(target=_worker, args=(task, blob, there), daemon=True)
        worker.start()
        there.close()
        record["worker_pid"] = worker.pid
        outcome = None
        if here.poll(seconds):
            outcome = pickle.loads(here.recv_bytes())
        worker.join(5)
        if worker.is_alive():
            worker.kill()
            worker.join()
        if outcome is None:
            record["outcome"] = "aborted"
            raise gr.Error("GPU task aborted", title="ZeroGPU worker error")
        if outcome[0] == "error":
            _, cls, gradio_error, tb = outcome
            record["outcome"] = f"error {cls}"
            if gradio_error is not None:
                raise gradio_error
            print(tb, file=sys.stderr)
            raise gr.Error(cls, title="ZeroGPU worker error")
        record["outcome"] = "ok"
        return outcome[1]

    call.__wrapped__ = task
    return call


spaces = types.ModuleType("spaces")
spaces.GPU = GPU
sys.modules["spaces"] = spaces

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def broken_checkpoint(where: Path) -> Path:
    """A MinerU-Diffusion directory whose weights are missing: it cannot load."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "config.json").write_text(json.dumps({"model_type": "mineru_diffusion"}), encoding="utf-8")
    return where


def run(handler, *args, **kwargs) -> dict:
    """A tab handler's frames, or the gr.Error it ended with (its title and message)."""
    import gradio as gr

    frames = []
    try:
        for frame in handler(*args, **kwargs):
            frames.append(frame)
    except gr.Error as exc:
        return {"frames": len(frames), "error": str(exc.message), "title": exc.title,
                "last_status": str(frames[-1][0])[:2000] if frames else ""}
    return {"frames": len(frames), "last_status": str(frames[-1][0])[:2000]}


def main(models_dir: str, max_tokens: int) -> None:
    import torch

    from models import registry
    from mudiff_viz.decoding.settings import preset_knobs
    from mudiff_viz.ui import compare_tab, decode_tab, gpu, shuffle_tab
    from tests.ui_support import SAMPLE, make_tiny_twins

    torch.set_num_threads(1)
    registry.NANO_DIR = make_tiny_twins(Path(models_dir))
    broken = str(broken_checkpoint(Path(models_dir) / "broken-mineru"))
    preloaded = gpu.preload_models(["nano", broken])
    knobs = preset_knobs(None, {"max_new_tokens": max_tokens})
    progress = lambda *a, **k: None  # noqa: E731  (a local closure: unpicklable, as gr.Progress's callbacks are)
    outputs = {
        "decode": run(decode_tab.run_decode, str(SAMPLE), 1, "nano", "diffusion", knobs, progress=progress),
        "compare": run(compare_tab.run_compare, str(SAMPLE), 1, "nano", "nano", "self-speculative", knobs, rounds=1,
                       progress=progress),
        "shuffle": run(shuffle_tab.run_shuffle, str(SAMPLE), 1, 1.0, 0, "nano", knobs, progress=progress),
        "bench": run(shuffle_tab.run_shuffle_bench, [1.0], 1, "nano", knobs, progress=progress),
        # a model that failed to preload, asked for: its one-line reason crosses the boundary
        "broken": run(decode_tab.run_decode, str(SAMPLE), 1, broken, "diffusion", knobs, progress=progress),
    }
    for name, fn, seconds in (("over_cap", lambda: None, CAP_S + 1),  # refused before any worker starts
                              ("aborted", lambda: time.sleep(30), 1)):  # outlives its duration: killed
        try:
            GPU(fn, duration=seconds)()
            outputs[name] = {"error": None}
        except Exception as exc:  # noqa: BLE001
            outputs[name] = {"error": str(getattr(exc, "message", exc)), "title": getattr(exc, "title", None)}
    print(json.dumps({"on_zero_gpu": gpu.ON_ZERO_GPU, "decorated": gpu.DECORATED, "calls": CALLS,
                      "parent_pid": os.getpid(), "preloaded": preloaded, "preload_failures": gpu.PRELOAD_FAILURES,
                      "preload_note": gpu.preload_note(), "outputs": outputs}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
