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

from models.mineru_diffusion.backend import MinerUDiffusionBackend
from mudiff_viz.core.trace import check_invariants
from mudiff_viz.core.types import Region
from mudiff_viz.decoding.diffusion import decode_diffusion
from mudiff_viz.decoding.sequential import decode_sequential
from mudiff_viz.decoding.settings import DecodeParams
from mudiff_viz.inputs.pages import load_page
from tests.test_real_models import _load, ar_dir, diffusion_dir, page_png  # noqa: F401 (module fixtures: the tiny checkpoints, a page)

torch.set_num_threads(1)
BOXES = [(0, 0, 200, 60), (0, 40, 120, 120), (20, 0, 200, 120)]  # three sizes: three prompt lengths


@pytest.fixture(scope="module")
def page(page_png):
    return load_page(page_png)


def regions() -> list[Region]:
    return [Region(bbox=tuple(float(v) for v in box), kind="text") for box in BOXES]


def commit_order(region) -> list[tuple[int, int]]:
    """(token index, rank of its commit forward among the region's forwards): the order of commits."""
    ranks = {f: i for i, f in enumerate(sorted({t.commit_forward for t in region.tokens}))}
    return [ranks[t.commit_forward] for t in region.tokens]


def decoded(trace) -> list[list[int]]:
    return [[t.id for t in r.tokens] for r in trace.regions]


def _backend(spec: Path, stop_ids=None, exec_mode: str = "eager") -> MinerUDiffusionBackend:
    loaded = _load(spec, "diffusion")
    return MinerUDiffusionBackend.from_parts(loaded.model, loaded.text, loaded.images, loaded.spec, exec_mode, stop_ids)


@pytest.mark.parametrize("fused, exec_mode", [(False, "eager"), (True, "eager"), (False, "static")])
def test_diffusion_batch_equals_one_region_at_a_time(diffusion_dir, page, fused, exec_mode):
    """``static``: one region at a time runs the fixed-shape forward the CUDA graphs replay, the batch eagerly."""
    probe = _backend(diffusion_dir, frozenset())  # no stop token: every block decodes
    params = DecodeParams(block_length=8, steps=8, threshold=0.5, max_new_tokens=24, fused=fused)
    alone = decode_sequential(probe, page, regions(), decode_diffusion, params)
    first, others = decoded(alone)[0], decoded(alone)[1:]
    # a stop token region 0 commits in its first block and some other region not: that one runs on
    stop = next(t for t in first[:8] if any(t not in ids[:8] for ids in others))
    backend = _backend(diffusion_dir, frozenset({stop}), exec_mode)
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


def test_diffusion_batch_logits_equal_each_row_alone(diffusion_dir, page):
    """A denoising forward and a commit per row, then a subset of rows (one sat out, one dropped):
    the batch's logits are each row's own."""
    backend = _backend(diffusion_dir)
    gen = torch.Generator().manual_seed(2)
    with torch.inference_mode():
        ctx = backend.encode(page, regions(), 8)
        own = [backend.encode(page, [r], 8) for r in regions()]
        one = torch.tensor([0])
        for rows in ([0, 1, 2], [0, 1, 2], [2, 0], [0, 2]):
            block = torch.randint(0, backend.cfg.text.vocab_size, (len(rows), 8), generator=gen)
            block[:, ::2] = backend.mask_id
            got = backend.block_logits(ctx, block, torch.tensor(rows))
            want = torch.cat([backend.block_logits(own[r], block[i : i + 1], one) for i, r in enumerate(rows)])
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
            if rows != [2, 0]:  # [2, 0] only denoises (a subset, reordered); the others commit
                block = block.clone()
                block[block == backend.mask_id] = 5
                backend.commit_block(ctx, block, torch.tensor(rows))
                for i, r in enumerate(rows):
                    backend.commit_block(own[r], block[i : i + 1], one)
        assert ctx.cache.alive == [0, 2]


@pytest.mark.parametrize("kind", ["diffusion", "ar"])
def test_a_batch_cannot_draft_and_verify(diffusion_dir, ar_dir, page, kind):
    """Draft-and-verify stays one row: a batch's context refuses it with a clear error."""
    from models.base import SpecLayout

    backend = _backend(diffusion_dir) if kind == "diffusion" else _ar_backend(ar_dir)
    ctx = backend.encode(page, regions(), 8)
    layout = SpecLayout(clean=torch.zeros(3, 1, dtype=torch.long), n_clean=torch.ones(3, dtype=torch.long),
                        queries_from=1, n_drafts=0)
    with pytest.raises(ValueError, match="one region at a time"):
        backend.spec_forward(ctx, torch.arange(3), layout)


def _ar_backend(spec: Path, stop_ids=None):
    from models.mineru25.backend import MinerU25Backend

    return MinerU25Backend(spec, "cpu", exec_mode="eager", stop_ids=stop_ids)


def test_mineru25_batch_equals_one_region_at_a_time(ar_dir, page):
    """Greedy with a no-repeat 1-gram (every token new, so positions and each row's history matter),
    a stop token that ends some rows early: the batch gives every region's tokens and commit order."""
    from mudiff_viz.decoding.autoregressive import decode_autoregressive

    params = DecodeParams.from_knobs(max_new_tokens=12, repetition="custom", no_repeat_ngram_size=1)
    alone = decode_sequential(_ar_backend(ar_dir, frozenset()), page, regions(), decode_autoregressive, params)
    first, others = decoded(alone)[0], decoded(alone)[1:]
    stop = next(t for t in first[:6] if any(t not in ids for ids in others))
    backend = _ar_backend(ar_dir, frozenset({stop}))
    alone = decode_sequential(backend, page, regions(), decode_autoregressive, params)
    batch = decode_autoregressive(backend, page, regions(), params)
    assert check_invariants(batch) == []
    lengths = [len(r.tokens) for r in batch.regions]
    assert lengths[0] <= 6 and max(lengths) == 12, lengths
    assert decoded(batch) == decoded(alone)
    assert [commit_order(r) for r in batch.regions] == [commit_order(r) for r in alone.regions]
    assert batch.metrics["nfe"] == alone.metrics["nfe"]
    assert batch.metrics["batched_forwards"] < alone.metrics["batched_forwards"]


def test_mineru25_batch_logits_equal_each_row_alone(ar_dir, page):
    """Teacher-forced: the batch's logits per row are the row's own, before and after a row drops out."""
    backend = _ar_backend(ar_dir)
    with torch.inference_mode():
        ctx = backend.encode(page, regions())
        assert len({len(p) for p in ctx.prompt_ids}) == 3
        own = [backend.encode(page, [r]) for r in regions()]
        torch.testing.assert_close(ctx.first_logits, torch.cat([c.first_logits for c in own]), atol=1e-4, rtol=1e-4)
        gen = torch.Generator().manual_seed(1)
        rows = [0, 1, 2]
        for step in range(4):
            if step == 2:
                rows = [0, 2]  # region 1 finished
            tokens = torch.randint(0, ctx.first_logits.shape[-1], (len(rows),), generator=gen)
            got = backend.next_logits(ctx, tokens, torch.tensor(rows))
            want = torch.cat([backend.next_logits(own[r], tokens[i : i + 1], torch.tensor([0])) for i, r in enumerate(rows)])
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_bench_region_batch_reports_the_batch_speedup(diffusion_dir, ar_dir, tmp_path):
    """``bench --region-batch`` on the tiny checkpoint: a speedup figure, equal tokens, fewer batched
    forwards for the batch (no timing is asserted)."""
    import json
    import os
    import subprocess
    import sys

    out = tmp_path / "rb.json"
    cmd = [sys.executable, "-m", "mudiff_viz", "bench", "--region-batch", "--model", str(diffusion_dir), "--ar-model", str(ar_dir), "--pages", "1",
           "--repeats", "1", "--regions", "3", "--threads", "1", "--max-new-tokens", "16", "--block-length", "8",
           "--steps", "8", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert set(result["decoders"]) == {"diffusion", "ar"}
    for name, entry in result["decoders"].items():
        assert entry["tokens_equal"] is True and entry["batch_speedup"] > 0, name
        page = entry["per_page"][0]
        assert page["regions"] == 3 and page["batch"]["nfe"] == page["one_at_a_time"]["nfe"], name
        assert entry["batched_forwards"]["batch"] < entry["batched_forwards"]["one_at_a_time"], name
    assert done.stdout.count("batch speedup") == 2


def test_two_stage_blocks_as_batches_equal_one_block_at_a_time(diffusion_dir, page):
    """The layout pass's blocks (a picture between them, two token limits) decoded as batches: the
    trace lists them in reading order with the tokens the one-at-a-time parse gives."""
    from dataclasses import replace

    from models.mineru_common.layout import parse_layout
    from models.mineru_common.tasks import layout_region
    from mudiff_viz.decoding.two_stage import decode_batches

    backend = _backend(diffusion_dir)
    params = DecodeParams(block_length=8, steps=8, threshold=0.5, max_new_tokens=16)
    layout_trace = decode_diffusion(backend, page, [layout_region(page.width, page.height)], params)
    answer = "\n".join(f"<|box_start|>{box}<|box_end|><|ref_start|>{kind}<|ref_end|><|rotate_up|>" for box, kind in [
        ("050 050 900 300", "title"), ("100 320 300 500", "image"), ("050 500 900 850", "table"),
        ("050 860 600 990", "text")])
    blocks = parse_layout(answer, page.width, page.height)

    def params_for(region):
        return replace(params, max_new_tokens=8 if region.kind == "table" else 16)

    alone = decode_sequential(backend, page, blocks, decode_diffusion, params, before=[layout_trace],
                              params_for=params_for)
    batched = decode_batches(page, blocks, lambda regions, own: decode_diffusion(backend, page, regions, own), params,
                             layout_trace, {"mode": "layout", "batched_blocks": True}, None, params_for)
    assert check_invariants(batched) == []
    assert [r.kind for r in batched.regions] == [r.kind for r in alone.regions] == ["layout", "title", "image", "table", "text"]
    assert [r.bbox for r in batched.regions] == [r.bbox for r in alone.regions]
    assert decoded(batched) == decoded(alone) and batched.regions[2].tokens == []
    assert [len(r.tokens) for r in batched.regions[1:]] == [16, 0, 8, 16]
    assert batched.text == alone.text and batched.params["batched_blocks"] is True
    assert {s.region for s in batched.steps} == {0, 1, 3, 4}
    assert batched.metrics["batched_forwards"] < alone.metrics["batched_forwards"]


def test_the_pipeline_batches_a_real_models_regions_only_when_asked(diffusion_dir, page):
    from mudiff_viz.decoding.pipeline import decode_page

    backend = _backend(diffusion_dir)
    params = DecodeParams(block_length=8, steps=8, threshold=0.5, max_new_tokens=8)
    for batch in (None, False, True):  # the whole page, one region: the same decode either way
        trace = decode_page(page, decoder="diffusion", backend=backend, params=params, batch_regions=batch)
        assert check_invariants(trace) == [] and len(trace.regions) == 1
    trace = decode_page(page, decoder="diffusion", backend=backend, params=params, mode="layout", batch_regions=True)
    assert check_invariants(trace) == [] and trace.regions[0].kind == "layout"


def test_the_notebook_and_cli_pass_batch_regions_through(diffusion_dir, page, tmp_path):
    from mudiff_viz.cli.main import main
    from mudiff_viz.core.trace import Trace
    from mudiff_viz.notebook.api import decode

    for batch in (True, None):
        trace = decode(page, model=str(diffusion_dir), mode="layout", batch_regions=batch, max_new_tokens=8,
                       block_length=8)
        assert check_invariants(trace) == [] and trace.params["batched_blocks"] is bool(batch)
    png = tmp_path / "page.png"
    page.image.save(png)
    out = tmp_path / "t.json"
    args = ["decode", str(png), "--model", str(diffusion_dir), "--mode", "layout", "--max-new-tokens", "8",
            "--block-length", "8", "--steps", "8", "--quiet", "--out", str(out)]
    assert main(args + ["--batch-regions"]) == 0
    assert Trace.load(out).params["batched_blocks"] is True
