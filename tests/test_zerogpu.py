"""ZeroGPU: every ``spaces.GPU`` call of the app runs in a forked worker with pickled arguments and
result, asks for a duration that follows the work and stays under the per-call cap (work is split
into one call per decode), and its errors cross as ``gr.Error`` with our one-line reason; models are
created at import, and one that cannot load is said. The tab handlers run for real, in a fresh
interpreter, under a stand-in ``spaces`` that behaves as spaces 0.51 does (tests/zerogpu_standin.py),
on tiny random nano twins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def boundary(tmp_path_factory) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, str(ROOT / "tests" / "zerogpu_standin.py"),
                          str(tmp_path_factory.mktemp("twins")), "16"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_every_decorated_call_runs_in_a_forked_worker(boundary):
    assert boundary["on_zero_gpu"] is True
    called = {c["name"] for c in boundary["calls"] if c["name"].startswith("mudiff_viz.")}
    assert set(boundary["decorated"]) == called == {"mudiff_viz.ui.jobs.decode_on_gpu", "mudiff_viz.ui.jobs.page_on_gpu"}
    ours = [c for c in boundary["calls"] if c["name"].startswith("mudiff_viz.")]
    assert all(c["bytes"] > 0 and c["worker_pid"] not in (None, boundary["parent_pid"]) for c in ours)
    assert len({c["worker_pid"] for c in ours}) == len(ours)  # a fresh fork each time
    # each handler ran to its result through the boundary (a pickling error would have failed it)
    out = boundary["outputs"]
    assert {k: out[k]["frames"] for k in ("decode", "compare", "shuffle", "bench")} == {
        "decode": 2, "compare": 2, "shuffle": 3, "bench": 1}
    assert "tokens per forward" in out["decode"]["last_status"] and "**diffusion**" in out["compare"]["last_status"]


def test_work_is_split_into_one_gpu_call_per_decode(boundary):
    names = [c["name"].rsplit(".", 1)[1] for c in boundary["calls"] if c["name"].startswith("mudiff_viz.")]
    # Decode: 1; Compare (AR, diffusion, self-speculative): 3; the broken model: 1
    assert names.count("decode_on_gpu") == 1 + 3 + 1
    # Shuffle: 4 decodes, then the probed page under 2 further seeds x 2 decoders (the seed spread);
    # benchmark: 4 bundled pages x 1 level x 1 seed x 2 decoders
    assert names.count("page_on_gpu") == 4 + 2 * 2 + 8


def test_durations_follow_the_work_under_the_cap(boundary):
    from mudiff_viz.ui.gpu import CAP_S, MIN_S, decode_seconds, over_cap

    assert all(MIN_S <= c["duration"] <= CAP_S and isinstance(c["duration"], int)
               for c in boundary["calls"] if c["name"].startswith("mudiff_viz."))
    assert decode_seconds({"max_new_tokens": 256}) < decode_seconds({"max_new_tokens": 4096}) < CAP_S
    assert decode_seconds({"max_new_tokens": 8192}) == CAP_S  # asked 429 s: held to the cap, its time limit inside
    assert decode_seconds({"max_new_tokens": 1024, "mode": "layout"}) == CAP_S  # its blocks are known only later
    assert over_cap({"max_new_tokens": 1024}) is None
    assert "300 s per call" in over_cap({"max_new_tokens": 8192}) and "layout" in over_cap({"mode": "layout"})


def test_a_call_above_the_cap_is_refused_and_one_past_its_duration_aborted(boundary):
    assert boundary["outputs"]["over_cap"]["title"] == "ZeroGPU illegal duration"
    assert boundary["outputs"]["aborted"] == {"error": "GPU task aborted", "title": "ZeroGPU worker error"}


def test_a_loading_failure_is_visible_and_our_reason_crosses(boundary):
    assert boundary["preloaded"] == [["nano", "diffusion"], ["nano", "ar"]]
    (failure,) = boundary["preload_failures"]
    assert "broken-mineru (diffusion) could not be created" in failure and "has no tokenizer.json" in failure
    assert "Models not ready" in boundary["preload_note"]
    broken = boundary["outputs"]["broken"]
    # not "ZeroGPU worker error: ModelLoadError": the one-line reason itself, in the toast and the status line
    assert broken["error"].endswith("broken-mineru has no tokenizer.json") and broken["title"] == "Error"
    assert "has no tokenizer" in broken["last_status"] and "internal failure" not in broken["last_status"]


def test_errors_cross_as_gr_error_with_our_reason():
    import gradio as gr

    from mudiff_viz.core.errors import UserInputError
    from mudiff_viz.ui.common import one_line
    from mudiff_viz.ui.gpu import crossing

    def bad(x):
        raise UserInputError(f"block length {x} is out of range <1..1024>")

    with pytest.raises(gr.Error) as caught:
        crossing(bad)(0)
    assert one_line(caught.value) == "block length 0 is out of range <1..1024>"
    worker = gr.Error("OutOfMemoryError", title="ZeroGPU worker error")  # what spaces raises for any other error
    assert one_line(worker) == "ZeroGPU worker error: OutOfMemoryError"


def test_checkpoints_are_read_on_the_cpu_when_cuda_is_emulated(monkeypatch):
    import types

    import torch

    from models.mineru_common.device import cuda_emulated, staging_device

    monkeypatch.delitem(sys.modules, "spaces", raising=False)
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    assert not cuda_emulated() and staging_device("cuda") == torch.device("cuda")
    monkeypatch.setitem(sys.modules, "spaces", types.ModuleType("spaces"))
    assert cuda_emulated()
    assert staging_device("cuda") == torch.device("cpu") and staging_device("cpu") == torch.device("cpu")
    monkeypatch.setenv("SPACES_ZERO_GPU", "")
    assert staging_device("cuda") == torch.device("cuda")


def test_models_are_created_at_import_on_a_space(tmp_path, monkeypatch):
    from models import registry
    from mudiff_viz.ui import gpu
    from tests.ui_support import make_tiny_twins

    monkeypatch.setattr(gpu, "ON_ZERO_GPU", True)
    monkeypatch.delenv("MUDIFF_PRELOAD", raising=False)
    assert gpu.preload_wanted()
    monkeypatch.setenv("MUDIFF_PRELOAD", "0")
    assert not gpu.preload_wanted()
    monkeypatch.setattr(registry, "NANO_DIR", make_tiny_twins(tmp_path))
    registry._cache.clear()
    try:
        monkeypatch.setattr(gpu, "PRELOAD_FAILURES", [])
        assert gpu.preload_models(["nano", str(tmp_path / "missing")]) == [("nano", "diffusion"), ("nano", "ar")]
        assert {(spec, kind) for spec, kind, _ in registry._cache} == {("nano", "diffusion"), ("nano", "ar")}
        (failure,) = gpu.PRELOAD_FAILURES  # logged and kept for the app's status line, not swallowed
        assert "missing (diffusion) could not be created" in failure and failure in gpu.preload_note()
    finally:
        registry._cache.clear()


def test_a_decode_stops_inside_its_gpu_call():
    from mudiff_viz.ui.gpu import BASE_S, CAP_S, call_limits

    assert call_limits({"max_new_tokens": 8192}).max_decode_seconds == CAP_S - BASE_S
    assert call_limits({"mode": "layout"}).max_decode_seconds == CAP_S - BASE_S
    assert call_limits({"max_new_tokens": 64}).max_decode_seconds == 30 - BASE_S  # the floor of a call, less its start
