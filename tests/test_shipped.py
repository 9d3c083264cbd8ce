"""Each model as shipped (issue 49): presets per model, the page as the model's release reads it, and
token limits that say when they cut. Tiny random checkpoints in the official layouts (written by
tests/test_real_models.py's writers), real decodes, the real CLI."""

from __future__ import annotations

import io
import random

import pytest
from PIL import Image

from models import registry
from mudiff_viz.core.limits import Limits
from mudiff_viz.core.trace import Trace, check_invariants
from mudiff_viz.decoding.pipeline import decode_page, make_params
from mudiff_viz.decoding.settings import DecodeParams, for_weights, preset_knobs
from mudiff_viz.inputs import synth
from mudiff_viz.inputs.pages import load_page
from mudiff_viz.views.tables import summary_markdown
from tests.test_real_models import _cli, write_ar_checkpoint, write_diffusion_checkpoint


@pytest.fixture(scope="module")
def diffusion_dir(tmp_path_factory):
    return write_diffusion_checkpoint(tmp_path_factory.mktemp("mineru-diffusion-tiny"))


@pytest.fixture(scope="module")
def ar_dir(tmp_path_factory):
    return write_ar_checkpoint(tmp_path_factory.mktemp("mineru25-tiny"))


@pytest.fixture(scope="module")
def tilted_png(tmp_path_factory):
    """A held-out page at 60 dpi turned 2 degrees counter-clockwise, white corners, as a PNG."""
    page = synth.random_page(random.Random(7), "test", style=synth.PageStyle(size=11.0, columns=1)).render(60)
    tilted = page.image.convert("L").rotate(2.0, resample=Image.BICUBIC, expand=True, fillcolor=255)
    path = tmp_path_factory.mktemp("tilted") / "tilted.png"
    tilted.save(path)
    return path


def _load(spec, decoder: str):
    registry._cache.clear()
    return registry.load_backend(str(spec), decoder, device="cpu")


def _ids(trace: Trace) -> list[list[int]]:
    return [[t.id for t in r.tokens] for r in trace.regions]


# ---- 1. presets act per model -----------------------------------------------------------------------


def test_release_preset_leaves_mineru25_greedy_from_the_cli(ar_dir, tilted_png, tmp_path):
    """--preset release with the AR decoder: MinerU2.5's client is greedy, so two seeds give the
    same tokens and the trace records temperature 0 (what ran) under the preset's name."""
    traces = []
    for seed in (0, 1):
        out = tmp_path / f"ar{seed}.json"
        res = _cli("decode", str(tilted_png), "--model", str(ar_dir), "--decoder", "ar", "--preset", "release",
                   "--seed", str(seed), "--max-new-tokens", "24", "--out", str(out))
        assert res.returncode == 0, res.stderr
        traces.append(Trace.load(out))
    a, b = traces
    assert _ids(a) == _ids(b) and sum(map(len, _ids(a))) > 0
    for t in traces:
        assert t.params["preset"] == "release" and t.params["temperature"] == 0.0
        assert t.params["preset_for_weights"] == {"kind": "ar", "temperature": 0.0}
        assert t.params["repetition_applied"]["rules"] == "client-hf"  # its 100-gram rule
        assert check_invariants(t) == []


def test_release_preset_samples_the_diffusion_model_as_its_demo_does(diffusion_dir, tilted_png, tmp_path):
    out = tmp_path / "d.json"
    res = _cli("decode", str(tilted_png), "--model", str(diffusion_dir), "--preset", "release", "--max-new-tokens",
               "16", "--out", str(out))
    assert res.returncode == 0, res.stderr
    params = Trace.load(out).params
    assert params["temperature"] == 1.0 and params["preset"] == "release" and "preset_for_weights" not in params


def test_the_release_preset_gives_each_kind_of_weights_its_own_values():
    """The diffusion model keeps the demo's (temperature 1.0, 4096 tokens); an AR model gets its
    client's: greedy, and no token cap below the limits in force. A knob set to something else than
    the preset's value stays as set."""
    limits = Limits(max_new_tokens=6000)
    params = make_params(limits, **preset_knobs("release", None, limits.max_new_tokens))
    diffusion, changed = for_weights(params, "diffusion")
    assert (diffusion.temperature, diffusion.max_new_tokens, changed) == (1.0, 4096, {})
    ar, changed = for_weights(params, "ar")
    assert (ar.temperature, ar.max_new_tokens) == (0.0, 6000)
    assert changed == {"temperature": 0.0, "max_new_tokens": 6000}
    own = make_params(limits, **preset_knobs("release", {"temperature": 0.7, "max_new_tokens": 64}, 6000))
    assert for_weights(own, "ar")[0].temperature == 0.7 and for_weights(own, "ar")[0].max_new_tokens == 64
    ours = make_params(limits, **preset_knobs(None, {"temperature": 1.0}, 6000))
    assert for_weights(ours, "ar") == (ours, {})  # our defaults: every knob as given


def test_notebook_compare_at_release_settings_pits_greedy_ar_against_sampled_diffusion(diffusion_dir, ar_dir,
                                                                                         tilted_png):
    from mudiff_viz.notebook.api import compare

    registry._cache.clear()
    res = compare(str(tilted_png), model=str(diffusion_dir), ar_model=str(ar_dir), preset="release",
                  max_new_tokens=16)
    assert res.ar.params["temperature"] == 0.0 and res.diffusion.params["temperature"] == 1.0
    assert res.ar.params["preset"] == res.diffusion.params["preset"] == "release"


def test_a_corpus_at_release_settings_runs_the_ar_model_and_refuses_sampled_diffusion(ar_dir, tilted_png, tmp_path):
    from mudiff_viz.core.errors import UserInputError
    from mudiff_viz.corpus.runner import run_corpus

    knobs = preset_knobs("release", {"max_new_tokens": 8}, 8192)
    with pytest.raises(UserInputError, match="temperature must be 0 \\(diffusion samples\\)"):
        run_corpus([str(tilted_png)], tmp_path / "store", decoders=["diffusion", "ar"], models=str(ar_dir), knobs=knobs)
    registry._cache.clear()
    summary = run_corpus([str(tilted_png)], tmp_path / "store", decoders=["ar"], models=str(ar_dir), knobs=knobs)
    assert summary.failed == 0 and summary.decoded == 1


# ---- 2. the page as the model's release reads it ----------------------------------------------------


def test_a_tilted_png_reaches_the_mineru_models_unstraightened_by_default(diffusion_dir, ar_dir, tilted_png):
    upload = load_page(tilted_png)
    for spec, decoder in ((diffusion_dir, "diffusion"), (ar_dir, "ar")):
        trace = decode_page(load_page(tilted_png), decoder=decoder, backend=_load(spec, decoder),
                            params=DecodeParams.from_knobs(max_new_tokens=8))
        assert trace.params["straighten"] is False and trace.page.skew is None
        assert (trace.page.width, trace.page.height) == upload.image.size
        assert "not straightened (straighten off)" in summary_markdown(trace)


def test_straighten_on_turns_the_skew_back_and_the_summary_says_so(diffusion_dir, tilted_png, tmp_path):
    out = tmp_path / "s.json"
    res = _cli("decode", str(tilted_png), "--model", str(diffusion_dir), "--straighten", "on", "--max-new-tokens", "8",
               "--out", str(out))
    assert res.returncode == 0, res.stderr
    trace = Trace.load(out)
    assert trace.params["straighten"] is True and trace.page.skew.angle == pytest.approx(2.0, abs=0.2)
    assert f"skew={trace.page.skew.angle:+.1f}deg" in res.stderr and "skew +" in summary_markdown(trace)
    res = _cli("decode", str(tilted_png), "--model", str(diffusion_dir), "--straighten", "maybe", "--out", str(out))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "--straighten" in res.stderr


def test_the_nano_pairs_straighten_and_relight_by_default():
    """A shadowed, tilted photo: the nano pair's default straightens it and the record says by how
    much the relighting changed the page."""
    from mudiff_viz.inputs.photo import photographed

    page = synth.random_page(random.Random(3), "test", style=synth.PageStyle(size=11.0, columns=1)).render(100)
    data = photographed(page, 2.0, light=0.5)
    trace = decode_page(load_page(data), model="nano", decoder="ar", params=DecodeParams.from_knobs(max_new_tokens=4))
    assert trace.params["straighten"] is True and trace.page.skew.angle == pytest.approx(2.0, abs=0.2)
    assert trace.page.skew.relit > 5 and f"relit ({trace.page.skew.relit:.1f} grey levels)" in summary_markdown(trace)
    off = decode_page(load_page(data), model="nano", decoder="ar",
                      params=DecodeParams.from_knobs(max_new_tokens=4, straighten=False))
    assert off.params["straighten"] is False and off.page.skew is None


# ---- 4. limits that say when they cut ---------------------------------------------------------------


def test_a_decode_cut_at_its_limit_says_so(diffusion_dir, ar_dir, tilted_png):
    """The tiny random models never write a stop token in a few tokens: each region stops at its
    limit, and the trace says so (a diffusion region writes whole blocks: the reason says why it
    holds more than asked)."""
    page = load_page(tilted_png)
    ar = decode_page(page, decoder="ar", backend=_load(ar_dir, "ar"), params=DecodeParams.from_knobs(max_new_tokens=12))
    assert ar.regions[0].n_generated == 12 and not any(t.stop for t in ar.regions[0].tokens)
    assert ar.metrics.truncated == "cut at 12 tokens" and "⚠ truncated: cut at 12 tokens" in summary_markdown(ar)
    diff = decode_page(page, decoder="diffusion", backend=_load(diffusion_dir, "diffusion"),
                       params=DecodeParams.from_knobs(max_new_tokens=8, block_length=32, steps=32))
    assert diff.params["tokens_per_region_max"] == 32 and diff.regions[0].n_generated == 32
    assert not any(t.stop for t in diff.regions[0].tokens)
    assert diff.metrics.truncated == "cut at 32 tokens (max tokens 8, written in whole blocks of 32)"
    assert check_invariants(ar) == [] and check_invariants(diff) == []


def test_per_task_limits_are_each_models_own(diffusion_dir, ar_dir):
    """task_limits "release": MinerU-Diffusion's passes within its release's limits; MinerU2.5's
    client sets none, so its passes take max tokens alone."""
    from mudiff_viz.decoding.two_stage import pass_params

    release = DecodeParams.from_knobs(max_new_tokens=4096)
    diffusion, ar = _load(diffusion_dir, "diffusion"), _load(ar_dir, "ar")
    tasks = ("layout", "table", "text", "formula")
    assert [pass_params(diffusion, release, t).max_new_tokens for t in tasks] == [2048, 2048, 1024, 1024]
    assert [pass_params(ar, release, t).max_new_tokens for t in tasks] == [4096] * 4
    uniform = DecodeParams.from_knobs(max_new_tokens=4096, task_limits="uniform")
    assert pass_params(diffusion, uniform, "text").max_new_tokens == 4096
