"""ZeroGPU: every ``spaces.GPU`` call of the app takes arguments that survive ``pickle.dumps`` (what
``spaces`` does at the boundary) and asks for a duration that follows the work; models can be
created at import. The tab handlers run for real, in a fresh interpreter, under a stand-in
``spaces`` (tests/zerogpu_standin.py), on tiny random nano twins."""

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


def test_every_decorated_call_pickles_its_real_arguments(boundary):
    assert boundary["on_zero_gpu"] is True
    called = {c["name"] for c in boundary["calls"]}
    assert set(boundary["decorated"]) == called == {
        "mudiff_viz.ui.jobs.decode_on_gpu", "mudiff_viz.ui.jobs.compare_on_gpu",
        "mudiff_viz.ui.shuffle_tab.shuffle_job", "mudiff_viz.ui.shuffle_tab._bench_job"}
    assert all(c["bytes"] > 0 for c in boundary["calls"])
    # each handler ran to its result through the boundary (a pickling error would have failed it)
    assert boundary["yields"] == {"decode": 2, "compare": 2, "shuffle": 2, "bench": 1}
    assert "tokens per forward" in boundary["last_status"]["decode"] and "**diffusion**" in boundary["last_status"]["compare"]


def test_the_comparison_is_one_gpu_call(boundary):
    names = [c["name"] for c in boundary["calls"]]
    assert names.count("mudiff_viz.ui.jobs.compare_on_gpu") == 1 and names.count("mudiff_viz.ui.jobs.decode_on_gpu") == 1


def test_durations_follow_the_work(boundary):
    from mudiff_viz.ui.gpu import MAX_S, MIN_S, decode_seconds

    seconds = {c["name"].rsplit(".", 1)[1]: c["duration"] for c in boundary["calls"]}
    assert all(MIN_S <= s <= MAX_S and isinstance(s, int) for s in seconds.values())
    assert seconds["decode_on_gpu"] < seconds["compare_on_gpu"] < seconds["shuffle_job"] < seconds["_bench_job"]
    assert decode_seconds({"max_new_tokens": 256}) < decode_seconds({"max_new_tokens": 4096}) <= MAX_S
    assert decode_seconds({"max_new_tokens": 1024}, passes=2) == 2 * decode_seconds({"max_new_tokens": 1024})


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
        assert gpu.preload_models(["nano", str(tmp_path / "missing")]) == [("nano", "diffusion"), ("nano", "ar")]
        assert {(spec, kind) for spec, kind, _ in registry._cache} == {("nano", "diffusion"), ("nano", "ar")}
    finally:
        registry._cache.clear()
