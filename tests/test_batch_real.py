"""Several regions of a page as one batch through the real backends equal one region at a time.

Tiny random checkpoints in the official layout (written by tests/test_real_models.py's writers);
regions of different sizes, so their prompts have different lengths (the batch left-pads them and
keeps each row's positions). Compared: every region's decoded ids and the order its tokens were
committed in (the step within the block of each commit), plus the clock's batched forwards.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw

from models.mineru_diffusion.backend import MinerUDiffusionBackend
from mudiff_viz.core.trace import check_invariants
from mudiff_viz.core.types import Region
from mudiff_viz.decoding.diffusion import decode_diffusion
from mudiff_viz.decoding.sequential import decode_sequential
from mudiff_viz.decoding.settings import DecodeParams
from mudiff_viz.inputs.pages import load_page
from tests.test_real_models import _load, write_diffusion_checkpoint

torch.set_num_threads(1)
BOXES = [(0, 0, 200, 60), (0, 40, 120, 120), (20, 0, 200, 120)]  # three sizes: three prompt lengths


@pytest.fixture(scope="module")
def diffusion_dir(tmp_path_factory) -> Path:
    return write_diffusion_checkpoint(tmp_path_factory.mktemp("mineru-diffusion-tiny"))


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    img = Image.new("RGB", (200, 120), "white")
    draw = ImageDraw.Draw(img)
    draw.text((10, 20), "The quick brown fox", fill="black")
    draw.rectangle((10, 60, 180, 100), outline="black")
    path = tmp_path_factory.mktemp("page") / "page.png"
    img.save(path)
    return load_page(path)


def regions() -> list[Region]:
    return [Region(bbox=tuple(float(v) for v in box), kind="text") for box in BOXES]


def commit_order(region) -> list[tuple[int, int]]:
    """(token index, rank of its commit forward among the region's forwards): the order of commits."""
    ranks = {f: i for i, f in enumerate(sorted({t.commit_forward for t in region.tokens}))}
    return [ranks[t.commit_forward] for t in region.tokens]


def decoded(trace) -> list[list[int]]:
    return [[t.id for t in r.tokens] for r in trace.regions]


def _backend(spec: Path, stop_ids=None) -> MinerUDiffusionBackend:
    loaded = _load(spec, "diffusion")
    return MinerUDiffusionBackend.from_parts(loaded.model, loaded.text, loaded.images, loaded.spec, "eager", stop_ids)


@pytest.mark.parametrize("fused", [False, True])
def test_diffusion_batch_equals_one_region_at_a_time(diffusion_dir, page, fused):
    probe = _backend(diffusion_dir, frozenset())  # no stop token: every block decodes
    params = DecodeParams(block_length=8, steps=8, threshold=0.5, max_new_tokens=24, fused=fused)
    alone = decode_sequential(probe, page, regions(), decode_diffusion, params)
    first, others = decoded(alone)[0], decoded(alone)[1:]
    # a stop token region 0 commits in its first block and some other region not: that one runs on
    stop = next(t for t in first[:8] if any(t not in ids[:8] for ids in others))
    backend = _backend(diffusion_dir, frozenset({stop}))
    alone = decode_sequential(backend, page, regions(), decode_diffusion, params)
    batch = decode_diffusion(backend, page, regions(), params)
    assert check_invariants(batch) == []
    lengths = [len(r.tokens) for r in batch.regions]
    assert lengths[0] <= 8 < max(lengths), lengths  # a row finished early, another ran on
    prompt_lens = backend.encode(page, regions(), 8).prompt_lens
    assert len(set(prompt_lens)) == 3  # three different prompt lengths in one batch
    assert decoded(batch) == decoded(alone)
    assert [commit_order(r) for r in batch.regions] == [commit_order(r) for r in alone.regions]
    assert batch.metrics["nfe"] == alone.metrics["nfe"]  # forwards per sequence
    assert batch.metrics["batched_forwards"] < alone.metrics["batched_forwards"]


def test_a_batch_cannot_draft_and_verify(diffusion_dir, page):
    from models.base import SpecLayout

    backend = _backend(diffusion_dir)
    ctx = backend.encode(page, regions(), 8)
    layout = SpecLayout(clean=torch.zeros(3, 1, dtype=torch.long), n_clean=torch.ones(3, dtype=torch.long),
                        queries_from=0, n_drafts=0)
    with pytest.raises(ValueError, match="one region at a time"):
        backend.spec_forward(ctx, torch.arange(3), layout)


def test_bench_region_batch_reports_the_batch_speedup(diffusion_dir, tmp_path):
    """``bench --region-batch`` on the tiny checkpoint: a speedup figure, equal tokens, fewer batched
    forwards for the batch (no timing is asserted)."""
    import json
    import os
    import subprocess
    import sys

    out = tmp_path / "rb.json"
    cmd = [sys.executable, "-m", "mudiff_viz", "bench", "--region-batch", "--model", str(diffusion_dir), "--pages", "1",
           "--repeats", "1", "--regions", "3", "--threads", "1", "--max-new-tokens", "16", "--block-length", "8",
           "--steps", "8", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    entry = result["decoders"]["diffusion"]
    assert entry["tokens_equal"] is True and entry["batch_speedup"] > 0
    page = entry["per_page"][0]
    assert page["regions"] == 3 and page["batch"]["nfe"] == page["one_at_a_time"]["nfe"]
    assert entry["batched_forwards"]["batch"] < entry["batched_forwards"]["one_at_a_time"]
    assert "batch speedup" in done.stdout


def test_bench_region_batch_refuses_a_model_that_cannot_batch(tmp_path):
    import os
    import subprocess
    import sys

    from tests.test_real_models import write_ar_checkpoint

    ar = write_ar_checkpoint(tmp_path / "ar")
    cmd = [sys.executable, "-m", "mudiff_viz", "bench", "--region-batch", "--model", str(ar), "--decoders", "ar",
           "--pages", "1", "--repeats", "1", "--out", str(tmp_path / "x.json")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode != 0 and "one batch" in done.stderr and "Traceback" not in done.stderr
